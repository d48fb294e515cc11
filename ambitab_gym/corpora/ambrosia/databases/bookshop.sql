CREATE TABLE book (
  id INTEGER PRIMARY KEY,
  title TEXT NOT NULL,
  author TEXT,
  format TEXT,
  published_year INTEGER,
  price REAL
);
INSERT INTO book VALUES (1, 'The Salt Road', 'Imogen Hale', 'Novel', 2012, 14.99);
INSERT INTO book VALUES (2, 'Northern Lights Over Ice', 'Arvid Lund', 'Novel', 2019, 17.5);
INSERT INTO book VALUES (3, 'A Quiet Harbour', 'Delia Marsh', 'Novel', 2021, 16.0);
INSERT INTO book VALUES (4, 'Glass Orchards', 'Tomas Vidal', 'Novel', 2008, 12.99);
INSERT INTO book VALUES (5, 'Ada: A Life in Numbers', 'Ruth Calloway', 'Biography', 2014, 22.0);
INSERT INTO book VALUES (6, 'The Last Cartographer', 'Benedict Shaw', 'Biography', 2018, 24.5);
INSERT INTO book VALUES (7, 'Voices of the Delta', 'Lorraine Pierce', 'Biography', 2022, 27.0);
INSERT INTO book VALUES (8, 'Marathon Mind', 'Kenji Mori', 'Biography', 2010, 19.99);
INSERT INTO book VALUES (9, 'Garden Monthly: Spring Issue', 'Garden Monthly', 'Magazine', 2024, 5.5);
INSERT INTO book VALUES (10, 'Tech Frontier Quarterly', 'Tech Frontier', 'Magazine', 2024, 8.95);
INSERT INTO book VALUES (11, 'Coastal Living Weekly', 'Coastal Living', 'Magazine', 2024, 4.25);
INSERT INTO book VALUES (12, 'Captain Comet #12', 'Ivy Ng', 'Comic', 2023, 3.99);
INSERT INTO book VALUES (13, 'The Iron Sparrow Collected', 'Ivy Ng', 'Comic', 2020, 19.99);
INSERT INTO book VALUES (14, 'Moonlit Alley #3', 'Ravi Desai', 'Comic', 2024, 4.99);
INSERT INTO book VALUES (15, 'Everyday Sourdough', 'Hannah Miller', 'Cookbook', 2017, 29.0);
