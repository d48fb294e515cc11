CREATE TABLE teacher (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  subject TEXT,
  club TEXT
);
INSERT INTO teacher VALUES (1, 'Margaret Owens', 'Mathematics', 'Chess');
INSERT INTO teacher VALUES (2, 'Victor Alvarez', 'Physics', 'Robotics');
INSERT INTO teacher VALUES (3, 'Naomi Fischer', 'English', 'Drama');
INSERT INTO teacher VALUES (4, 'Kwame Mensah', 'History', 'Debate');
INSERT INTO teacher VALUES (5, 'Laura Bianchi', 'Computer Science', 'Robotics');
INSERT INTO teacher VALUES (6, 'Ethan Brooks', 'Chemistry', 'Chess');
INSERT INTO teacher VALUES (7, 'Sofia Lindqvist', 'Art', 'Drama');
INSERT INTO teacher VALUES (8, 'Raj Patel', 'Economics', 'Debate');

CREATE TABLE student (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  grade INTEGER,
  club TEXT
);
INSERT INTO student VALUES (1, 'Ava Thompson', 10, 'Robotics');
INSERT INTO student VALUES (2, 'Liam Nguyen', 11, 'Chess');
INSERT INTO student VALUES (3, 'Mia Kowalski', 9, 'Drama');
INSERT INTO student VALUES (4, 'Noah Adeyemi', 12, 'Debate');
INSERT INTO student VALUES (5, 'Zoe Martin', 10, 'Robotics');
INSERT INTO student VALUES (6, 'Lucas Ferreira', 11, 'Debate');
INSERT INTO student VALUES (7, 'Chloe Dubois', 9, 'Chess');
INSERT INTO student VALUES (8, 'Aiden Park', 12, 'Robotics');
INSERT INTO student VALUES (9, 'Ella Schmidt', 11, 'Drama');
INSERT INTO student VALUES (10, 'Omar Haddad', 10, 'Debate');
INSERT INTO student VALUES (11, 'Grace Kim', 9, 'Robotics');
INSERT INTO student VALUES (12, 'Jack O''Brien', 12, 'Chess');
INSERT INTO student VALUES (13, 'Isla Murray', 10, 'Drama');
INSERT INTO student VALUES (14, 'Mason Rossi', 11, 'Debate');
