CREATE TABLE neighbourhood (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  listing_views_last_month INTEGER,
  sales_last_year INTEGER
);
INSERT INTO neighbourhood VALUES (1, 'Old Port', 18400, 62);
INSERT INTO neighbourhood VALUES (2, 'Maple Heights', 9300, 118);
INSERT INTO neighbourhood VALUES (3, 'Canal District', 12700, 85);
INSERT INTO neighbourhood VALUES (4, 'Sunnyside', 6100, 47);

CREATE TABLE apartment (
  id INTEGER PRIMARY KEY,
  address TEXT NOT NULL,
  neighbourhood_id INTEGER REFERENCES neighbourhood(id),
  floor_area_m2 REAL,
  rooms INTEGER,
  asking_price INTEGER
);
INSERT INTO apartment VALUES (1, '14 Wharf Lane, Apt 3', 1, 142.0, 4, 690000);
INSERT INTO apartment VALUES (2, '88 Maple Avenue, Apt 12', 2, 96.5, 5, 415000);
INSERT INTO apartment VALUES (3, '5 Lock Street, Apt 1', 3, 118.0, 3, 560000);
INSERT INTO apartment VALUES (4, '230 Sunnyside Road, Apt 7', 4, 74.0, 3, 289000);
INSERT INTO apartment VALUES (5, '41 Harbour View, Apt 9', 1, 58.0, 2, 352000);
INSERT INTO apartment VALUES (6, '17 Elm Court, Apt 4', 2, 101.0, 4, 398000);
INSERT INTO apartment VALUES (7, '9 Towpath Row, Apt 2', 3, 83.5, 3, 441000);
