CREATE TABLE hotel (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  city TEXT,
  stars INTEGER
);
INSERT INTO hotel VALUES (1, 'Bayview Grand', 'Monterey', 4);
INSERT INTO hotel VALUES (2, 'Cedar Lodge', 'Asheville', 3);
INSERT INTO hotel VALUES (3, 'Riverside Suites', 'Austin', 4);
INSERT INTO hotel VALUES (4, 'Old Town Inn', 'Santa Fe', 3);
INSERT INTO hotel VALUES (5, 'Summit Peak Hotel', 'Denver', 5);

CREATE TABLE amenity (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL
);
INSERT INTO amenity VALUES (1, 'Free Wi-Fi');
INSERT INTO amenity VALUES (2, 'Breakfast Buffet');
INSERT INTO amenity VALUES (3, 'Outdoor Pool');
INSERT INTO amenity VALUES (4, 'Fitness Room');
INSERT INTO amenity VALUES (5, 'Airport Shuttle');
INSERT INTO amenity VALUES (6, 'Spa');
INSERT INTO amenity VALUES (7, 'On-site Parking');
INSERT INTO amenity VALUES (8, 'Pet Friendly');

CREATE TABLE hotel_amenity (
  hotel_id INTEGER REFERENCES hotel(id),
  amenity_id INTEGER REFERENCES amenity(id)
);
INSERT INTO hotel_amenity VALUES (1, 1);
INSERT INTO hotel_amenity VALUES (1, 2);
INSERT INTO hotel_amenity VALUES (1, 3);
INSERT INTO hotel_amenity VALUES (1, 6);
INSERT INTO hotel_amenity VALUES (1, 7);
INSERT INTO hotel_amenity VALUES (2, 1);
INSERT INTO hotel_amenity VALUES (2, 2);
INSERT INTO hotel_amenity VALUES (2, 7);
INSERT INTO hotel_amenity VALUES (2, 8);
INSERT INTO hotel_amenity VALUES (3, 1);
INSERT INTO hotel_amenity VALUES (3, 3);
INSERT INTO hotel_amenity VALUES (3, 4);
INSERT INTO hotel_amenity VALUES (3, 7);
INSERT INTO hotel_amenity VALUES (4, 1);
INSERT INTO hotel_amenity VALUES (4, 2);
INSERT INTO hotel_amenity VALUES (4, 7);
INSERT INTO hotel_amenity VALUES (4, 8);
INSERT INTO hotel_amenity VALUES (5, 1);
INSERT INTO hotel_amenity VALUES (5, 4);
INSERT INTO hotel_amenity VALUES (5, 5);
INSERT INTO hotel_amenity VALUES (5, 6);
INSERT INTO hotel_amenity VALUES (5, 7);

CREATE TABLE room_type (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  max_guests INTEGER
);
INSERT INTO room_type VALUES (1, 'Single', 1);
INSERT INTO room_type VALUES (2, 'Double', 2);
INSERT INTO room_type VALUES (3, 'Twin', 2);
INSERT INTO room_type VALUES (4, 'Family Suite', 5);
INSERT INTO room_type VALUES (5, 'Penthouse', 4);
INSERT INTO room_type VALUES (6, 'Accessible Double', 2);

CREATE TABLE hotel_room (
  hotel_id INTEGER REFERENCES hotel(id),
  room_type_id INTEGER REFERENCES room_type(id),
  nightly_rate REAL
);
INSERT INTO hotel_room VALUES (1, 2, 219.0);
INSERT INTO hotel_room VALUES (1, 4, 349.0);
INSERT INTO hotel_room VALUES (1, 5, 780.0);
INSERT INTO hotel_room VALUES (1, 6, 219.0);
INSERT INTO hotel_room VALUES (2, 1, 99.0);
INSERT INTO hotel_room VALUES (2, 2, 129.0);
INSERT INTO hotel_room VALUES (2, 3, 129.0);
INSERT INTO hotel_room VALUES (3, 2, 189.0);
INSERT INTO hotel_room VALUES (3, 3, 179.0);
INSERT INTO hotel_room VALUES (3, 4, 289.0);
INSERT INTO hotel_room VALUES (3, 6, 189.0);
INSERT INTO hotel_room VALUES (4, 1, 110.0);
INSERT INTO hotel_room VALUES (4, 2, 145.0);
INSERT INTO hotel_room VALUES (5, 2, 310.0);
INSERT INTO hotel_room VALUES (5, 5, 1150.0);
INSERT INTO hotel_room VALUES (5, 6, 310.0);
