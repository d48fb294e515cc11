CREATE TABLE park (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  district TEXT
);
INSERT INTO park VALUES (1, 'Riverside Park', 'West End');
INSERT INTO park VALUES (2, 'Oakwood Commons', 'North Hills');
INSERT INTO park VALUES (3, 'Lakeshore Park', 'Harbour');

CREATE TABLE playground (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  park_id INTEGER REFERENCES park(id),
  age_range TEXT
);
INSERT INTO playground VALUES (1, 'Pirate Ship Play Area', 1, '2-8');
INSERT INTO playground VALUES (2, 'Treetop Adventure', 2, '6-12');
INSERT INTO playground VALUES (3, 'Sandy Cove Tot Lot', 3, '1-5');
INSERT INTO playground VALUES (4, 'Riverbend Climbing Zone', 1, '5-12');
INSERT INTO playground VALUES (5, 'Acorn Swings', 2, '2-10');

CREATE TABLE picnic_area (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  park_id INTEGER REFERENCES park(id),
  tables INTEGER,
  covered INTEGER
);
INSERT INTO picnic_area VALUES (1, 'Willow Meadow', 1, 12, 0);
INSERT INTO picnic_area VALUES (2, 'Boathouse Pavilion', 1, 8, 1);
INSERT INTO picnic_area VALUES (3, 'Oak Grove', 2, 10, 0);
INSERT INTO picnic_area VALUES (4, 'Harbour Lookout', 3, 6, 1);
INSERT INTO picnic_area VALUES (5, 'Dune Grass Tables', 3, 9, 0);
