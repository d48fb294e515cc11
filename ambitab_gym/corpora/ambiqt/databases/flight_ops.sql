CREATE TABLE aircraft (
  aircraft_id INTEGER PRIMARY KEY,
  registration TEXT NOT NULL,
  model TEXT,
  manufacturer TEXT,
  capacity INTEGER,
  seats INTEGER,
  range_km INTEGER
);
INSERT INTO aircraft VALUES (1, 'N801AL', '737-800', 'Boeing', 128, 172, 5400);
INSERT INTO aircraft VALUES (2, 'N802AL', '737 MAX 8', 'Boeing', 140, 178, 6500);
INSERT INTO aircraft VALUES (3, 'N320AL', 'A320neo', 'Airbus', 76, 186, 6300);
INSERT INTO aircraft VALUES (4, 'N321AL', 'A321neo', 'Airbus', 178, 196, 7400);
INSERT INTO aircraft VALUES (5, 'N757AL', '757-200', 'Boeing', 76, 176, 7200);
INSERT INTO aircraft VALUES (6, 'N789AL', '787-9', 'Boeing', 186, 290, 14000);
INSERT INTO aircraft VALUES (7, 'N330AL', 'A330-300', 'Airbus', 140, 292, 11700);
INSERT INTO aircraft VALUES (8, 'N175AL', 'E175', 'Embraer', 172, 76, 3700);
INSERT INTO aircraft VALUES (9, 'N900AL', 'CRJ900', 'Bombardier', 172, 76, 2900);
INSERT INTO aircraft VALUES (10, 'N220AL', 'A220-300', 'Airbus', 76, 140, 6200);
INSERT INTO aircraft VALUES (11, 'N767AL', '767-300ER', 'Boeing', 176, 211, 11000);
INSERT INTO aircraft VALUES (12, 'N319AL', 'A319', 'Airbus', 172, 128, 6900);

CREATE TABLE flight (
  flight_id INTEGER PRIMARY KEY,
  flight_no TEXT NOT NULL,
  origin TEXT,
  departure_city TEXT,
  destination TEXT,
  distance INTEGER,
  mileage INTEGER,
  aircraft_id INTEGER REFERENCES aircraft(aircraft_id)
);
INSERT INTO flight VALUES (1, 'AL101', 'Denver', 'Denver', 'Chicago', 862, 888, 1);
INSERT INTO flight VALUES (2, 'AL102', 'Seattle', 'Los Angeles', 'Chicago', 2422, 1745, 6);
INSERT INTO flight VALUES (3, 'AL103', 'New York', 'Atlanta', 'Chicago', 594, 606, 8);
INSERT INTO flight VALUES (4, 'AL104', 'Denver', 'Seattle', 'Chicago', 594, 1721, 4);
INSERT INTO flight VALUES (5, 'AL105', 'Chicago', 'Boston', 'Chicago', 602, 867, 3);
INSERT INTO flight VALUES (6, 'AL106', 'Phoenix', 'Dallas', 'Chicago', 594, 802, 2);
INSERT INTO flight VALUES (7, 'AL201', 'Seattle', 'New York', 'Los Angeles', 2475, 2475, 7);
INSERT INTO flight VALUES (8, 'AL202', 'Dallas', 'Miami', 'New York', 867, 1089, 5);
INSERT INTO flight VALUES (9, 'AL203', 'Dallas', 'Phoenix', 'Denver', 1562, 602, 10);
INSERT INTO flight VALUES (10, 'AL204', 'Phoenix', 'Seattle', 'Denver', 2611, 1024, 12);
INSERT INTO flight VALUES (11, 'AL205', 'Boston', 'Denver', 'Los Angeles', 594, 862, 1);
INSERT INTO flight VALUES (12, 'AL206', 'Los Angeles', 'Atlanta', 'Miami', 1440, 594, 9);
INSERT INTO flight VALUES (13, 'AL301', 'Denver', 'Boston', 'Dallas', 802, 1562, 4);
INSERT INTO flight VALUES (14, 'AL302', 'Dallas', 'Dallas', 'Seattle', 1199, 1660, 3);
INSERT INTO flight VALUES (15, 'AL303', 'Atlanta', 'Phoenix', 'Atlanta', 602, 1587, 2);
INSERT INTO flight VALUES (16, 'AL304', 'Seattle', 'New York', 'Seattle', 888, 2422, 11);
INSERT INTO flight VALUES (17, 'AL305', 'Denver', 'Denver', 'Boston', 2422, 1754, 5);
INSERT INTO flight VALUES (18, 'AL306', 'Denver', 'Miami', 'Chicago', 862, 1197, 10);
INSERT INTO flight VALUES (19, 'AL401', 'Boston', 'Los Angeles', 'Boston', 1562, 2611, 6);
INSERT INTO flight VALUES (20, 'AL402', 'Seattle', 'Atlanta', 'Denver', 606, 1199, 12);
INSERT INTO flight VALUES (21, 'AL403', 'Seattle', 'Denver', 'Atlanta', 1440, 1199, 3);
INSERT INTO flight VALUES (22, 'AL404', 'Miami', 'Chicago', 'Phoenix', 1089, 1440, 2);
