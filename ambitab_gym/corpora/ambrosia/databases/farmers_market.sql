CREATE TABLE vendor (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  owner TEXT
);
INSERT INTO vendor VALUES (1, 'Green Acre Farm', 'Rosa Delgado');
INSERT INTO vendor VALUES (2, 'Hillside Honey', 'Tom Becker');
INSERT INTO vendor VALUES (3, 'Sunny Slope Orchard', 'Priya Nair');
INSERT INTO vendor VALUES (4, 'Miller''s Bakery', 'Hannah Miller');
INSERT INTO vendor VALUES (5, 'Two Rivers Dairy', 'Samuel Okafor');

CREATE TABLE product (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  category TEXT
);
INSERT INTO product VALUES (1, 'Honey', 'pantry');
INSERT INTO product VALUES (2, 'Apples', 'produce');
INSERT INTO product VALUES (3, 'Sourdough Loaf', 'bakery');
INSERT INTO product VALUES (4, 'Free-range Eggs', 'dairy and eggs');
INSERT INTO product VALUES (5, 'Goat Cheese', 'dairy and eggs');
INSERT INTO product VALUES (6, 'Heirloom Tomatoes', 'produce');
INSERT INTO product VALUES (7, 'Fruit Jam', 'pantry');
INSERT INTO product VALUES (8, 'Apple Cider', 'drinks');
INSERT INTO product VALUES (9, 'Gift Basket', 'gifts');

CREATE TABLE vendor_product (
  vendor_id INTEGER REFERENCES vendor(id),
  product_id INTEGER REFERENCES product(id),
  price REAL
);
INSERT INTO vendor_product VALUES (1, 4, 6.0);
INSERT INTO vendor_product VALUES (1, 6, 4.5);
INSERT INTO vendor_product VALUES (1, 7, 7.0);
INSERT INTO vendor_product VALUES (1, 9, 35.0);
INSERT INTO vendor_product VALUES (2, 1, 12.0);
INSERT INTO vendor_product VALUES (2, 7, 8.0);
INSERT INTO vendor_product VALUES (2, 9, 40.0);
INSERT INTO vendor_product VALUES (3, 2, 3.5);
INSERT INTO vendor_product VALUES (3, 7, 7.5);
INSERT INTO vendor_product VALUES (3, 8, 6.0);
INSERT INTO vendor_product VALUES (3, 9, 38.0);
INSERT INTO vendor_product VALUES (4, 3, 8.0);
INSERT INTO vendor_product VALUES (4, 7, 6.5);
INSERT INTO vendor_product VALUES (4, 9, 30.0);
INSERT INTO vendor_product VALUES (5, 4, 6.5);
INSERT INTO vendor_product VALUES (5, 5, 9.0);
INSERT INTO vendor_product VALUES (5, 7, 7.0);
INSERT INTO vendor_product VALUES (5, 9, 45.0);

CREATE TABLE market_day (
  id INTEGER PRIMARY KEY,
  day_name TEXT,
  location TEXT
);
INSERT INTO market_day VALUES (1, 'Saturday', 'Downtown Square');
INSERT INTO market_day VALUES (2, 'Sunday', 'Riverside Promenade');
INSERT INTO market_day VALUES (3, 'Wednesday', 'Library Parking Lot');
INSERT INTO market_day VALUES (4, 'Thursday', 'Hospital Green');

CREATE TABLE vendor_schedule (
  vendor_id INTEGER REFERENCES vendor(id),
  market_day_id INTEGER REFERENCES market_day(id)
);
INSERT INTO vendor_schedule VALUES (1, 1);
INSERT INTO vendor_schedule VALUES (1, 3);
INSERT INTO vendor_schedule VALUES (2, 1);
INSERT INTO vendor_schedule VALUES (2, 2);
INSERT INTO vendor_schedule VALUES (3, 1);
INSERT INTO vendor_schedule VALUES (3, 2);
INSERT INTO vendor_schedule VALUES (3, 4);
INSERT INTO vendor_schedule VALUES (4, 1);
INSERT INTO vendor_schedule VALUES (4, 3);
INSERT INTO vendor_schedule VALUES (5, 1);
INSERT INTO vendor_schedule VALUES (5, 4);
