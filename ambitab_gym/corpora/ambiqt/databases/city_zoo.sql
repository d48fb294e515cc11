CREATE TABLE keeper (
  keeper_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  hired_year INTEGER,
  salary INTEGER,
  wage INTEGER
);
INSERT INTO keeper VALUES (1, 'Rosa Jimenez', 2008, 64000, 67500);
INSERT INTO keeper VALUES (2, 'Hamid Karimi', 2015, 52000, 58500);
INSERT INTO keeper VALUES (3, 'Beth Sullivan', 2011, 58500, 58500);
INSERT INTO keeper VALUES (4, 'Tariq Nolan', 2019, 44000, 55500);
INSERT INTO keeper VALUES (5, 'Wendy Liu', 2013, 55500, 64000);
INSERT INTO keeper VALUES (6, 'Gus Andersen', 2021, 42500, 64000);
INSERT INTO keeper VALUES (7, 'Amara Diallo', 2006, 67500, 48000);
INSERT INTO keeper VALUES (8, 'Colin Fraser', 2017, 48000, 42500);

CREATE TABLE animal (
  animal_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  species TEXT,
  enclosure TEXT,
  habitat TEXT,
  birth_year INTEGER,
  weight_kg REAL,
  mass_kg REAL,
  keeper_id INTEGER REFERENCES keeper(keeper_id)
);
INSERT INTO animal VALUES (1, 'Kibo', 'African Elephant', 'Savanna Yard', 'Savanna Yard', 1998, 1050.0, 5400.0, 1);
INSERT INTO animal VALUES (2, 'Nandi', 'African Elephant', 'Northern Trail', 'Savanna Yard', 2006, 310.0, 3900.0, 1);
INSERT INTO animal VALUES (3, 'Zuri', 'Giraffe', 'Asian Forest', 'Savanna Yard', 2012, 310.0, 1050.0, 2);
INSERT INTO animal VALUES (4, 'Simba', 'Lion', 'Polar Coast', 'Big Cat Ridge', 2014, 5400.0, 190.0, 3);
INSERT INTO animal VALUES (5, 'Asha', 'Lion', 'Savanna Yard', 'Big Cat Ridge', 2016, 52.0, 128.0, 3);
INSERT INTO animal VALUES (6, 'Raja', 'Bengal Tiger', 'Savanna Yard', 'Big Cat Ridge', 2013, 310.0, 220.0, 3);
INSERT INTO animal VALUES (7, 'Pip', 'Rockhopper Penguin', 'Asian Forest', 'Polar Coast', 2019, 128.0, 2.8, 4);
INSERT INTO animal VALUES (8, 'Waddles', 'Gentoo Penguin', 'Savanna Yard', 'Polar Coast', 2017, 1050.0, 5.6, 4);
INSERT INTO animal VALUES (9, 'Koa', 'Grizzly Bear', 'Savanna Yard', 'Northern Trail', 2010, 5.6, 310.0, 5);
INSERT INTO animal VALUES (10, 'Juniper', 'Grizzly Bear', 'Polar Coast', 'Northern Trail', 2015, 5.1, 205.0, 5);
INSERT INTO animal VALUES (11, 'Mango', 'Red Panda', 'Polar Coast', 'Asian Forest', 2020, 105.0, 5.1, 6);
INSERT INTO animal VALUES (12, 'Bao', 'Giant Panda', 'Asian Forest', 'Asian Forest', 2011, 52.0, 105.0, 6);
INSERT INTO animal VALUES (13, 'Tembo', 'Hippopotamus', 'Asian Forest', 'River Basin', 2004, 52.0, 1500.0, 7);
INSERT INTO animal VALUES (14, 'Luna', 'Gray Wolf', 'Savanna Yard', 'Northern Trail', 2018, 1500.0, 41.0, 5);
INSERT INTO animal VALUES (15, 'Rio', 'Capybara', 'Northern Trail', 'River Basin', 2021, 3900.0, 52.0, 7);
INSERT INTO animal VALUES (16, 'Ollie', 'Sea Otter', 'Savanna Yard', 'Polar Coast', 2019, 1050.0, 28.0, 4);
INSERT INTO animal VALUES (17, 'Makena', 'African Elephant', 'Savanna Yard', 'Savanna Yard', 2018, 205.0, 1800.0, 1);
INSERT INTO animal VALUES (18, 'Jabari', 'Giraffe', 'Big Cat Ridge', 'Savanna Yard', 2009, 5.6, 1250.0, 2);
