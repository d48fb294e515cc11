CREATE TABLE restaurant (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  city TEXT,
  cuisine TEXT,
  avg_rating REAL,
  review_count INTEGER,
  michelin_stars INTEGER,
  avg_main_price REAL,
  set_lunch_price REAL
);
INSERT INTO restaurant VALUES (1, 'Ember & Oak', 'Chicago', 'American', 4.8, 2310, 0, 34.0, 28.0);
INSERT INTO restaurant VALUES (2, 'Maison Lumiere', 'Chicago', 'French', 4.5, 1120, 2, 58.0, 45.0);
INSERT INTO restaurant VALUES (3, 'Trattoria Nonna', 'Chicago', 'Italian', 4.6, 3105, 0, 24.0, 19.0);
INSERT INTO restaurant VALUES (4, 'Kaiseki Hoshi', 'Chicago', 'Japanese', 4.4, 640, 1, 72.0, 55.0);
INSERT INTO restaurant VALUES (5, 'Taqueria El Sol', 'Chicago', 'Mexican', 4.3, 4020, 0, 13.0, 11.5);
INSERT INTO restaurant VALUES (6, 'Golden Gate Noodle House', 'San Francisco', 'Chinese', 4.2, 2890, 0, 15.5, 14.0);
INSERT INTO restaurant VALUES (7, 'Saison Verte', 'San Francisco', 'French', 4.7, 980, 3, 95.0, 68.0);
INSERT INTO restaurant VALUES (8, 'Mission Street Pupusas', 'San Francisco', 'Salvadoran', 4.5, 1750, 0, 12.0, 13.5);
INSERT INTO restaurant VALUES (9, 'Fog City Bistro', 'San Francisco', 'Californian', 4.1, 1430, 0, 31.0, 24.0);
INSERT INTO restaurant VALUES (10, 'Sakura Counter', 'San Francisco', 'Japanese', 4.6, 870, 1, 48.0, 9.5);
