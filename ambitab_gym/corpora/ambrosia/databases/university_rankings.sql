CREATE TABLE university (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  country TEXT,
  world_rank INTEGER,
  research_papers_2023 INTEGER,
  nobel_laureates INTEGER,
  student_satisfaction REAL
);
INSERT INTO university VALUES (1, 'Northbridge Institute of Technology', 'United States', 1, 17800, 34, 4.1);
INSERT INTO university VALUES (2, 'University of Kingsford', 'United Kingdom', 3, 15400, 69, 4.3);
INSERT INTO university VALUES (3, 'Helvetia Polytechnic', 'Switzerland', 7, 11200, 22, 4.4);
INSERT INTO university VALUES (4, 'Pacific Coast University', 'United States', 5, 19600, 58, 4.0);
INSERT INTO university VALUES (5, 'Tokai Imperial University', 'Japan', 12, 14100, 11, 3.9);
INSERT INTO university VALUES (6, 'Maple Leaf University', 'Canada', 18, 12900, 10, 4.2);
