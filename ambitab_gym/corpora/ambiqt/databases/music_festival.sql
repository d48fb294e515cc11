CREATE TABLE singer (
  singer_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  country TEXT,
  genre TEXT,
  debut_year INTEGER,
  age INTEGER,
  years_old INTEGER
);
INSERT INTO singer VALUES (1, 'Lena Hartmann', 'Germany', 'Pop', 2012, 30, 34);
INSERT INTO singer VALUES (2, 'Marcus Reed', 'United States', 'Country', 2005, 36, 41);
INSERT INTO singer VALUES (3, 'Aiko Morita', 'Japan', 'J-Pop', 2016, 31, 27);
INSERT INTO singer VALUES (4, 'Julien Marchand', 'France', 'Chanson', 1998, 24, 52);
INSERT INTO singer VALUES (5, 'Chloe Tremblay', 'Canada', 'Indie Folk', 2014, 24, 31);
INSERT INTO singer VALUES (6, 'Darnell Brooks', 'United States', 'R&B', 2009, 30, 38);
INSERT INTO singer VALUES (7, 'Sofia Esposito', 'Italy', 'Opera', 2001, 34, 45);
INSERT INTO singer VALUES (8, 'Ethan MacLeod', 'Canada', 'Rock', 1995, 56, 56);
INSERT INTO singer VALUES (9, 'Priya Raman', 'India', 'Playback', 2011, 29, 36);
INSERT INTO singer VALUES (10, 'Tomas Lindberg', 'Sweden', 'Electronic', 2018, 52, 29);
INSERT INTO singer VALUES (11, 'Grace Okoye', 'Nigeria', 'Afrobeats', 2015, 41, 30);
INSERT INTO singer VALUES (12, 'Noah Bergeron', 'Canada', 'Pop', 2019, 58, 24);
INSERT INTO singer VALUES (13, 'Valentina Cruz', 'Mexico', 'Latin Pop', 2007, 24, 39);
INSERT INTO singer VALUES (14, 'Oliver Grant', 'United Kingdom', 'Rock', 1990, 29, 58);
INSERT INTO singer VALUES (15, 'Mei Lin', 'China', 'Mandopop', 2013, 27, 33);
INSERT INTO singer VALUES (16, 'Samuel Adeyemi', 'United Kingdom', 'Soul', 2003, 38, 47);

CREATE TABLE concert (
  concert_id INTEGER PRIMARY KEY,
  title TEXT NOT NULL,
  year INTEGER,
  venue TEXT,
  location TEXT,
  attendance INTEGER,
  crowd_size INTEGER,
  headliner_id INTEGER REFERENCES singer(singer_id)
);
INSERT INTO concert VALUES (1, 'Summer Solstice Nights', 2019, 'Red Rocks Amphitheatre', 'Hollywood Bowl', 9400, 12400, 3);
INSERT INTO concert VALUES (2, 'Coastline Sessions', 2019, 'Hollywood Bowl', 'Ryman Auditorium', 17200, 9300, 13);
INSERT INTO concert VALUES (3, 'City Lights Live', 2019, 'Madison Square Garden', 'Red Rocks Amphitheatre', 19500, 2300, 6);
INSERT INTO concert VALUES (4, 'Evergreen Weekend', 2019, 'The Gorge Amphitheatre', 'Austin City Limits Live', 21000, 2650, 8);
INSERT INTO concert VALUES (5, 'Songs from Nashville', 2019, 'Ryman Auditorium', 'The Gorge Amphitheatre', 2300, 17200, 2);
INSERT INTO concert VALUES (6, 'Return to the Rocks', 2021, 'Red Rocks Amphitheatre', 'The Gorge Amphitheatre', 6200, 16900, 14);
INSERT INTO concert VALUES (7, 'Bowl Under the Stars', 2021, 'Hollywood Bowl', 'Austin City Limits Live', 12400, 9400, 7);
INSERT INTO concert VALUES (8, 'Texas Sound Night', 2021, 'Austin City Limits Live', 'Hollywood Bowl', 2700, 2250, 5);
INSERT INTO concert VALUES (9, 'Garden Arena Encore', 2022, 'Madison Square Garden', 'Hollywood Bowl', 18800, 2350, 16);
INSERT INTO concert VALUES (10, 'Columbia River Festival', 2022, 'The Gorge Amphitheatre', 'Madison Square Garden', 24500, 16900, 11);
INSERT INTO concert VALUES (11, 'Acoustic Sunday', 2022, 'Ryman Auditorium', 'Red Rocks Amphitheatre', 2250, 9500, 5);
INSERT INTO concert VALUES (12, 'Rocky Mountain High', 2022, 'Red Rocks Amphitheatre', 'Austin City Limits Live', 9500, 21000, 1);
INSERT INTO concert VALUES (13, 'Pacific Glow', 2022, 'Hollywood Bowl', 'Austin City Limits Live', 16900, 2650, 15);
INSERT INTO concert VALUES (14, 'Live from Austin', 2023, 'Austin City Limits Live', 'Hollywood Bowl', 2650, 20100, 10);
INSERT INTO concert VALUES (15, 'Midsummer Arena Tour', 2023, 'Madison Square Garden', 'Madison Square Garden', 20100, 2250, 4);
INSERT INTO concert VALUES (16, 'Gorge Sunset Sessions', 2023, 'The Gorge Amphitheatre', 'Red Rocks Amphitheatre', 22800, 17200, 12);
INSERT INTO concert VALUES (17, 'Mother Church Revival', 2023, 'Ryman Auditorium', 'Madison Square Garden', 2350, 21000, 9);
INSERT INTO concert VALUES (18, 'Amphitheatre Anthems', 2023, 'Red Rocks Amphitheatre', 'Hollywood Bowl', 9300, 6200, 16);
