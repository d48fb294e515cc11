CREATE TABLE product (
  product_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  category TEXT,
  price REAL,
  cost REAL,
  stock INTEGER,
  inventory INTEGER
);
INSERT INTO product VALUES (1, 'Cast Iron Skillet', 'Kitchen', 329.0, 39.99, 180, 140);
INSERT INTO product VALUES (2, 'Chef''s Knife', 'Kitchen', 29.99, 89.0, 18, 65);
INSERT INTO product VALUES (3, 'Stand Mixer', 'Kitchen', 129.0, 329.0, 65, 18);
INSERT INTO product VALUES (4, 'Espresso Machine', 'Kitchen', 45.0, 249.0, 120, 22);
INSERT INTO product VALUES (5, 'Bamboo Cutting Board', 'Kitchen', 249.0, 24.5, 70, 210);
INSERT INTO product VALUES (6, 'Garden Hose 50 ft', 'Garden', 59.99, 34.99, 150, 95);
INSERT INTO product VALUES (7, 'Cordless Hedge Trimmer', 'Garden', 39.99, 119.0, 75, 30);
INSERT INTO product VALUES (8, 'Raised Garden Bed', 'Garden', 129.0, 149.0, 75, 26);
INSERT INTO product VALUES (9, 'Pruning Shears', 'Garden', 119.0, 19.99, 26, 180);
INSERT INTO product VALUES (10, 'Bluetooth Speaker', 'Electronics', 34.99, 59.99, 120, 75);
INSERT INTO product VALUES (11, 'Noise Cancelling Headphones', 'Electronics', 119.0, 199.0, 150, 40);
INSERT INTO product VALUES (12, 'Smart Thermostat', 'Electronics', 199.0, 129.0, 95, 35);
INSERT INTO product VALUES (13, 'USB-C Charger', 'Electronics', 24.5, 29.99, 18, 260);
INSERT INTO product VALUES (14, 'Memory Foam Pillow', 'Home', 45.0, 45.0, 75, 120);
INSERT INTO product VALUES (15, 'Linen Duvet Cover', 'Home', 329.0, 110.0, 75, 48);
INSERT INTO product VALUES (16, 'Table Lamp', 'Home', 129.0, 64.0, 15, 70);
INSERT INTO product VALUES (17, 'Robot Vacuum', 'Home', 199.0, 279.0, 26, 15);
INSERT INTO product VALUES (18, 'Watering Can', 'Garden', 45.0, 14.99, 95, 150);

CREATE TABLE store (
  store_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  city TEXT,
  town TEXT,
  manager TEXT,
  supervisor TEXT,
  opened_year INTEGER
);
INSERT INTO store VALUES (1, 'Lakeside', 'Madison', 'Springfield', 'Keiko Yamada', 'Dana Whitfield', 2004);
INSERT INTO store VALUES (2, 'Riverside', 'Salem', 'Portland', 'Tyrone Jackson', 'Miguel Santos', 2010);
INSERT INTO store VALUES (3, 'Downtown', 'Columbus', 'Madison', 'Paulo Mendes', 'Keiko Yamada', 1999);
INSERT INTO store VALUES (4, 'Hillcrest', 'Madison', 'Columbus', 'Tyrone Jackson', 'Frank Osei', 2012);
INSERT INTO store VALUES (5, 'Maple Grove', 'Portland', 'Springfield', 'Frank Osei', 'Irina Volkova', 2016);
INSERT INTO store VALUES (6, 'Oak Park', 'Springfield', 'Salem', 'Greta Olsen', 'Tyrone Jackson', 2008);
INSERT INTO store VALUES (7, 'Harbor Point', 'Columbus', 'Madison', 'Ahmed Farouk', 'Lucy Chen', 2019);
INSERT INTO store VALUES (8, 'Westfield', 'Springfield', 'Portland', 'Lucy Chen', 'Ahmed Farouk', 2014);
INSERT INTO store VALUES (9, 'Pine Ridge', 'Portland', 'Salem', 'Greta Olsen', 'Greta Olsen', 2021);
INSERT INTO store VALUES (10, 'Sunset Plaza', 'Salem', 'Springfield', 'Dana Whitfield', 'Paulo Mendes', 2007);
