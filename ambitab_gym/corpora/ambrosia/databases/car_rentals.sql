CREATE TABLE branch (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  city TEXT,
  fleet_size INTEGER,
  floor_area_m2 INTEGER,
  rentals_last_year INTEGER
);
INSERT INTO branch VALUES (1, 'Airport Terminal B', 'Phoenix', 420, 380, 31500);
INSERT INTO branch VALUES (2, 'Downtown Central', 'Phoenix', 160, 1250, 14200);
INSERT INTO branch VALUES (3, 'Scottsdale Road', 'Scottsdale', 95, 640, 7800);
INSERT INTO branch VALUES (4, 'Tempe University', 'Tempe', 70, 410, 6100);

CREATE TABLE car (
  id INTEGER PRIMARY KEY,
  model TEXT NOT NULL,
  category TEXT,
  daily_rate REAL,
  fuel_l_per_100km REAL,
  seats INTEGER,
  branch_id INTEGER REFERENCES branch(id)
);
INSERT INTO car VALUES (1, 'Toyota Prius', 'hybrid', 58.0, 4.1, 5, 1);
INSERT INTO car VALUES (2, 'Nissan Versa', 'economy', 39.0, 6.6, 5, 2);
INSERT INTO car VALUES (3, 'Chevrolet Spark', 'mini', 35.0, 6.2, 4, 3);
INSERT INTO car VALUES (4, 'Ford Explorer', 'SUV', 89.0, 10.7, 7, 1);
INSERT INTO car VALUES (5, 'Honda Civic', 'compact', 47.0, 6.4, 5, 4);
INSERT INTO car VALUES (6, 'Chrysler Pacifica', 'minivan', 95.0, 10.2, 8, 2);
INSERT INTO car VALUES (7, 'Hyundai Ioniq Hybrid', 'hybrid', 55.0, 4.3, 5, 3);
INSERT INTO car VALUES (8, 'Jeep Wrangler', 'SUV', 99.0, 12.4, 5, 4);
