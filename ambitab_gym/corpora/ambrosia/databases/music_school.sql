CREATE TABLE teacher (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  hired_year INTEGER
);
INSERT INTO teacher VALUES (1, 'Clara Jensen', 2011);
INSERT INTO teacher VALUES (2, 'Mateo Ruiz', 2016);
INSERT INTO teacher VALUES (3, 'Ingrid Holm', 2008);
INSERT INTO teacher VALUES (4, 'Daniel Cho', 2019);

CREATE TABLE instrument (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  family TEXT
);
INSERT INTO instrument VALUES (1, 'Piano', 'keyboard');
INSERT INTO instrument VALUES (2, 'Guitar', 'strings');
INSERT INTO instrument VALUES (3, 'Violin', 'strings');
INSERT INTO instrument VALUES (4, 'Cello', 'strings');
INSERT INTO instrument VALUES (5, 'Flute', 'woodwind');
INSERT INTO instrument VALUES (6, 'Drums', 'percussion');
INSERT INTO instrument VALUES (7, 'Ukulele', 'strings');

CREATE TABLE teacher_instrument (
  teacher_id INTEGER REFERENCES teacher(id),
  instrument_id INTEGER REFERENCES instrument(id),
  years_playing INTEGER
);
INSERT INTO teacher_instrument VALUES (1, 1, 25);
INSERT INTO teacher_instrument VALUES (1, 3, 18);
INSERT INTO teacher_instrument VALUES (2, 1, 10);
INSERT INTO teacher_instrument VALUES (2, 2, 15);
INSERT INTO teacher_instrument VALUES (2, 7, 6);
INSERT INTO teacher_instrument VALUES (3, 1, 30);
INSERT INTO teacher_instrument VALUES (3, 4, 22);
INSERT INTO teacher_instrument VALUES (3, 5, 12);
INSERT INTO teacher_instrument VALUES (4, 1, 8);
INSERT INTO teacher_instrument VALUES (4, 6, 14);
INSERT INTO teacher_instrument VALUES (4, 2, 5);
