CREATE TABLE gym (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  neighbourhood TEXT,
  opened_year INTEGER
);
INSERT INTO gym VALUES (1, 'Ironworks Fitness', 'Eastside', 2009);
INSERT INTO gym VALUES (2, 'Harbor Strength Studio', 'Waterfront', 2015);
INSERT INTO gym VALUES (3, 'Pinecrest Athletic Club', 'Pinecrest', 1998);
INSERT INTO gym VALUES (4, 'Northgate Gym', 'Northgate', 2012);

CREATE TABLE fitness_class (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  intensity TEXT
);
INSERT INTO fitness_class VALUES (1, 'Yoga', 'low');
INSERT INTO fitness_class VALUES (2, 'Spin', 'high');
INSERT INTO fitness_class VALUES (3, 'Pilates', 'medium');
INSERT INTO fitness_class VALUES (4, 'Kickboxing', 'high');
INSERT INTO fitness_class VALUES (5, 'Zumba', 'medium');
INSERT INTO fitness_class VALUES (6, 'HIIT Circuit', 'high');
INSERT INTO fitness_class VALUES (7, 'Aqua Aerobics', 'low');
INSERT INTO fitness_class VALUES (8, 'Barre', 'medium');

CREATE TABLE gym_class (
  gym_id INTEGER REFERENCES gym(id),
  class_id INTEGER REFERENCES fitness_class(id),
  weekly_sessions INTEGER
);
INSERT INTO gym_class VALUES (1, 1, 6);
INSERT INTO gym_class VALUES (1, 2, 8);
INSERT INTO gym_class VALUES (1, 4, 3);
INSERT INTO gym_class VALUES (1, 6, 5);
INSERT INTO gym_class VALUES (2, 1, 10);
INSERT INTO gym_class VALUES (2, 2, 4);
INSERT INTO gym_class VALUES (2, 3, 6);
INSERT INTO gym_class VALUES (2, 8, 3);
INSERT INTO gym_class VALUES (3, 1, 7);
INSERT INTO gym_class VALUES (3, 2, 5);
INSERT INTO gym_class VALUES (3, 3, 4);
INSERT INTO gym_class VALUES (3, 5, 3);
INSERT INTO gym_class VALUES (3, 7, 2);
INSERT INTO gym_class VALUES (4, 1, 4);
INSERT INTO gym_class VALUES (4, 2, 6);
INSERT INTO gym_class VALUES (4, 4, 2);
INSERT INTO gym_class VALUES (4, 5, 3);
INSERT INTO gym_class VALUES (4, 6, 4);

CREATE TABLE equipment (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  category TEXT
);
INSERT INTO equipment VALUES (1, 'Treadmill', 'cardio');
INSERT INTO equipment VALUES (2, 'Rowing Machine', 'cardio');
INSERT INTO equipment VALUES (3, 'Squat Rack', 'strength');
INSERT INTO equipment VALUES (4, 'Kettlebell Set', 'strength');
INSERT INTO equipment VALUES (5, 'Leg Press', 'strength');
INSERT INTO equipment VALUES (6, 'Elliptical Trainer', 'cardio');
INSERT INTO equipment VALUES (7, 'Climbing Wall', 'specialty');
INSERT INTO equipment VALUES (8, 'Cable Crossover', 'strength');

CREATE TABLE gym_equipment (
  gym_id INTEGER REFERENCES gym(id),
  equipment_id INTEGER REFERENCES equipment(id),
  units INTEGER
);
INSERT INTO gym_equipment VALUES (1, 1, 12);
INSERT INTO gym_equipment VALUES (1, 3, 4);
INSERT INTO gym_equipment VALUES (1, 4, 6);
INSERT INTO gym_equipment VALUES (1, 5, 2);
INSERT INTO gym_equipment VALUES (1, 8, 2);
INSERT INTO gym_equipment VALUES (2, 1, 6);
INSERT INTO gym_equipment VALUES (2, 2, 4);
INSERT INTO gym_equipment VALUES (2, 3, 2);
INSERT INTO gym_equipment VALUES (2, 4, 3);
INSERT INTO gym_equipment VALUES (3, 1, 15);
INSERT INTO gym_equipment VALUES (3, 2, 8);
INSERT INTO gym_equipment VALUES (3, 3, 5);
INSERT INTO gym_equipment VALUES (3, 4, 8);
INSERT INTO gym_equipment VALUES (3, 6, 10);
INSERT INTO gym_equipment VALUES (3, 7, 1);
INSERT INTO gym_equipment VALUES (4, 1, 9);
INSERT INTO gym_equipment VALUES (4, 3, 3);
INSERT INTO gym_equipment VALUES (4, 4, 4);
INSERT INTO gym_equipment VALUES (4, 5, 2);
INSERT INTO gym_equipment VALUES (4, 6, 6);
