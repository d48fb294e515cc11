CREATE TABLE doctor (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  specialty TEXT,
  ward TEXT
);
INSERT INTO doctor VALUES (1, 'Dr. Helen Carter', 'Cardiologist', 'Cardiology');
INSERT INTO doctor VALUES (2, 'Dr. Samuel Osei', 'Oncologist', 'Oncology');
INSERT INTO doctor VALUES (3, 'Dr. Yuki Tanaka', 'Pediatrician', 'Pediatrics');
INSERT INTO doctor VALUES (4, 'Dr. Marco Bellini', 'Cardiac Surgeon', 'Cardiology');
INSERT INTO doctor VALUES (5, 'Dr. Fatima Rahman', 'Emergency Physician', 'Emergency');
INSERT INTO doctor VALUES (6, 'Dr. Peter Lindgren', 'Oncologist', 'Oncology');

CREATE TABLE nurse (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  ward TEXT,
  shift TEXT
);
INSERT INTO nurse VALUES (1, 'Anna Kowal', 'Cardiology', 'day');
INSERT INTO nurse VALUES (2, 'Brian Walsh', 'Emergency', 'night');
INSERT INTO nurse VALUES (3, 'Carmen Diaz', 'Pediatrics', 'day');
INSERT INTO nurse VALUES (4, 'Derek Huang', 'Cardiology', 'night');
INSERT INTO nurse VALUES (5, 'Esther Mwangi', 'Oncology', 'day');
INSERT INTO nurse VALUES (6, 'Felix Wagner', 'Emergency', 'day');
INSERT INTO nurse VALUES (7, 'Gloria Santos', 'Cardiology', 'day');
INSERT INTO nurse VALUES (8, 'Hugo Laurent', 'Pediatrics', 'night');

CREATE TABLE pharmacist (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  shift TEXT
);
INSERT INTO pharmacist VALUES (1, 'Irene Novak', 'day');
INSERT INTO pharmacist VALUES (2, 'James Adebayo', 'night');
INSERT INTO pharmacist VALUES (3, 'Katrin Vogel', 'day');
INSERT INTO pharmacist VALUES (4, 'Leon Petrov', 'night');

CREATE TABLE lab_technician (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  lab TEXT,
  shift TEXT
);
INSERT INTO lab_technician VALUES (1, 'Maya Singh', 'Hematology', 'night');
INSERT INTO lab_technician VALUES (2, 'Nils Eriksson', 'Microbiology', 'day');
INSERT INTO lab_technician VALUES (3, 'Olga Ivanova', 'Chemistry', 'day');
INSERT INTO lab_technician VALUES (4, 'Pablo Moreno', 'Hematology', 'night');
INSERT INTO lab_technician VALUES (5, 'Quinn Foster', 'Microbiology', 'day');
