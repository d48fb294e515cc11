CREATE TABLE county_health_2021 (
  fips TEXT PRIMARY KEY,
  county TEXT NOT NULL,
  state TEXT NOT NULL,
  population INTEGER,
  adult_smoking_pct REAL,
  adult_obesity_pct REAL,
  physical_inactivity_pct REAL,
  uninsured_pct REAL,
  primary_care_physicians_per_100k REAL
);
INSERT INTO county_health_2021 VALUES ('48201', 'Harris County', 'Texas', 4731145, 14.3, 28.6, 21.4, 21.6, 59.1);
INSERT INTO county_health_2021 VALUES ('48113', 'Dallas County', 'Texas', 2613539, 15.1, 30.5, 21.7, 19.5, 45.0);
INSERT INTO county_health_2021 VALUES ('48439', 'Tarrant County', 'Texas', 2110640, 11.7, 29.5, 21.7, 23.3, 48.9);
INSERT INTO county_health_2021 VALUES ('48029', 'Bexar County', 'Texas', 2009324, 12.0, 27.9, 25.1, 19.3, 54.2);
INSERT INTO county_health_2021 VALUES ('48453', 'Travis County', 'Texas', 1290188, 13.6, 31.5, 26.3, 14.2, 82.8);
INSERT INTO county_health_2021 VALUES ('48141', 'El Paso County', 'Texas', 865657, 14.3, 27.8, 25.6, 23.4, 55.8);
INSERT INTO county_health_2021 VALUES ('48215', 'Hidalgo County', 'Texas', 870781, 16.4, 38.1, 29.0, 31.2, 12.0);
INSERT INTO county_health_2021 VALUES ('48061', 'Cameron County', 'Texas', 421017, 16.3, 31.7, 26.0, 29.3, 12.0);
INSERT INTO county_health_2021 VALUES ('48479', 'Webb County', 'Texas', 267114, 16.7, 34.6, 30.3, 27.4, 36.9);
INSERT INTO county_health_2021 VALUES ('48303', 'Lubbock County', 'Texas', 310639, 12.2, 28.7, 22.4, 19.8, 56.8);
INSERT INTO county_health_2021 VALUES ('48085', 'Collin County', 'Texas', 1064465, 13.6, 32.3, 24.7, 14.8, 75.4);
INSERT INTO county_health_2021 VALUES ('48121', 'Denton County', 'Texas', 906422, 14.2, 28.2, 21.4, 13.0, 38.0);
INSERT INTO county_health_2021 VALUES ('06037', 'Los Angeles County', 'California', 10014009, 6.6, 23.0, 20.2, 7.0, 87.6);
INSERT INTO county_health_2021 VALUES ('06073', 'San Diego County', 'California', 3298634, 8.9, 23.8, 15.5, 11.5, 64.6);
INSERT INTO county_health_2021 VALUES ('06059', 'Orange County', 'California', 3186989, 9.2, 21.5, 15.2, 9.1, 83.8);
INSERT INTO county_health_2021 VALUES ('06001', 'Alameda County', 'California', 1682353, 10.4, 24.2, 17.0, 10.4, 70.0);
INSERT INTO county_health_2021 VALUES ('06075', 'San Francisco County', 'California', 873965, 8.3, 24.1, 15.2, 4.1, 121.3);
INSERT INTO county_health_2021 VALUES ('06019', 'Fresno County', 'California', 1008654, 11.3, 31.2, 20.3, 11.4, 45.2);
INSERT INTO county_health_2021 VALUES ('06029', 'Kern County', 'California', 909235, 9.9, 30.1, 23.0, 9.8, 75.9);
INSERT INTO county_health_2021 VALUES ('06085', 'Santa Clara County', 'California', 1936259, 8.5, 27.3, 17.4, 7.5, 127.6);
INSERT INTO county_health_2021 VALUES ('06067', 'Sacramento County', 'California', 1585055, 11.4, 26.3, 18.9, 7.2, 75.8);
INSERT INTO county_health_2021 VALUES ('06025', 'Imperial County', 'California', 179702, 13.9, 27.5, 24.0, 11.2, 44.5);
INSERT INTO county_health_2021 VALUES ('17031', 'Cook County', 'Illinois', 5275541, 12.8, 31.9, 20.7, 6.7, 84.3);
INSERT INTO county_health_2021 VALUES ('17043', 'DuPage County', 'Illinois', 932877, 11.9, 28.6, 18.0, 3.1, 114.0);
INSERT INTO county_health_2021 VALUES ('17097', 'Lake County', 'Illinois', 714342, 11.5, 31.0, 21.4, 8.8, 69.2);
INSERT INTO county_health_2021 VALUES ('17197', 'Will County', 'Illinois', 696355, 13.5, 29.8, 21.1, 8.2, 89.2);
INSERT INTO county_health_2021 VALUES ('17019', 'Champaign County', 'Illinois', 205865, 13.8, 27.3, 23.7, 10.7, 95.8);
INSERT INTO county_health_2021 VALUES ('12086', 'Miami-Dade County', 'Florida', 2701767, 16.0, 28.5, 20.9, 19.3, 80.2);
INSERT INTO county_health_2021 VALUES ('12011', 'Broward County', 'Florida', 1944375, 16.4, 26.4, 25.0, 15.0, 55.3);
INSERT INTO county_health_2021 VALUES ('12099', 'Palm Beach County', 'Florida', 1492191, 13.7, 26.9, 20.1, 13.1, 62.9);
INSERT INTO county_health_2021 VALUES ('12057', 'Hillsborough County', 'Florida', 1459762, 11.7, 24.9, 24.7, 13.5, 60.2);
INSERT INTO county_health_2021 VALUES ('12095', 'Orange County', 'Florida', 1429908, 15.0, 27.0, 20.5, 17.6, 50.6);
INSERT INTO county_health_2021 VALUES ('12031', 'Duval County', 'Florida', 995567, 11.8, 29.0, 25.2, 13.4, 68.4);
INSERT INTO county_health_2021 VALUES ('36047', 'Kings County', 'New York', 2736074, 9.8, 22.3, 19.3, 5.2, 73.1);
INSERT INTO county_health_2021 VALUES ('36081', 'Queens County', 'New York', 2405464, 10.3, 21.6, 19.1, 5.7, 97.0);
INSERT INTO county_health_2021 VALUES ('36061', 'New York County', 'New York', 1694251, 13.2, 25.0, 21.4, 5.2, 176.8);
INSERT INTO county_health_2021 VALUES ('36005', 'Bronx County', 'New York', 1472654, 9.3, 23.9, 19.8, 6.0, 67.2);
INSERT INTO county_health_2021 VALUES ('36029', 'Erie County', 'New York', 954236, 10.2, 23.5, 20.8, 7.4, 84.7);
INSERT INTO county_health_2021 VALUES ('36055', 'Monroe County', 'New York', 759443, 10.5, 28.3, 21.1, 5.2, 64.0);
INSERT INTO county_health_2021 VALUES ('28049', 'Hinds County', 'Mississippi', 227742, 19.0, 34.6, 26.3, 13.3, 26.0);
INSERT INTO county_health_2021 VALUES ('28047', 'Harrison County', 'Mississippi', 208621, 18.9, 40.2, 28.0, 15.6, 69.3);
INSERT INTO county_health_2021 VALUES ('28033', 'DeSoto County', 'Mississippi', 185314, 21.1, 39.1, 26.8, 15.1, 48.6);
INSERT INTO county_health_2021 VALUES ('28011', 'Bolivar County', 'Mississippi', 30985, 21.1, 42.9, 30.2, 15.4, 12.0);
INSERT INTO county_health_2021 VALUES ('28151', 'Washington County', 'Mississippi', 44922, 20.0, 41.4, 34.8, 15.4, 33.7);
INSERT INTO county_health_2021 VALUES ('54039', 'Kanawha County', 'West Virginia', 180745, 23.6, 34.9, 26.2, 5.9, 81.3);
INSERT INTO county_health_2021 VALUES ('54047', 'McDowell County', 'West Virginia', 19111, 23.4, 41.5, 29.9, 8.6, 34.4);
INSERT INTO county_health_2021 VALUES ('54061', 'Monongalia County', 'West Virginia', 105822, 23.4, 37.8, 26.7, 8.9, 101.2);
INSERT INTO county_health_2021 VALUES ('54011', 'Cabell County', 'West Virginia', 94350, 22.3, 33.1, 29.9, 10.2, 91.6);
INSERT INTO county_health_2021 VALUES ('08031', 'Denver County', 'Colorado', 715522, 13.8, 20.2, 12.8, 7.2, 101.9);
INSERT INTO county_health_2021 VALUES ('08013', 'Boulder County', 'Colorado', 330758, 11.5, 16.5, 14.7, 3.6, 98.6);
INSERT INTO county_health_2021 VALUES ('08041', 'El Paso County', 'Colorado', 730395, 13.6, 17.3, 16.3, 10.7, 105.6);
INSERT INTO county_health_2021 VALUES ('08101', 'Pueblo County', 'Colorado', 168162, 12.2, 22.4, 16.6, 8.6, 77.6);
INSERT INTO county_health_2021 VALUES ('13121', 'Fulton County', 'Georgia', 1066710, 16.9, 33.2, 25.9, 15.4, 68.4);
INSERT INTO county_health_2021 VALUES ('13089', 'DeKalb County', 'Georgia', 764382, 15.7, 31.8, 22.7, 15.8, 42.2);
INSERT INTO county_health_2021 VALUES ('13135', 'Gwinnett County', 'Georgia', 957062, 15.8, 28.3, 22.8, 20.4, 60.1);
INSERT INTO county_health_2021 VALUES ('13051', 'Chatham County', 'Georgia', 295291, 17.5, 32.8, 23.7, 14.6, 46.3);
INSERT INTO county_health_2021 VALUES ('13095', 'Dougherty County', 'Georgia', 85790, 19.2, 36.7, 27.5, 16.3, 33.6);
INSERT INTO county_health_2021 VALUES ('21111', 'Jefferson County', 'Kentucky', 782969, 22.1, 34.0, 30.2, 5.1, 53.7);
INSERT INTO county_health_2021 VALUES ('21067', 'Fayette County', 'Kentucky', 322570, 19.2, 30.7, 29.3, 8.9, 109.3);
INSERT INTO county_health_2021 VALUES ('21195', 'Pike County', 'Kentucky', 58669, 23.2, 41.3, 29.7, 8.8, 25.9);
INSERT INTO county_health_2021 VALUES ('27053', 'Hennepin County', 'Minnesota', 1281565, 10.2, 27.4, 19.7, 3.8, 95.5);
INSERT INTO county_health_2021 VALUES ('27123', 'Ramsey County', 'Minnesota', 552352, 10.4, 24.3, 18.1, 6.0, 96.2);
INSERT INTO county_health_2021 VALUES ('27109', 'Olmsted County', 'Minnesota', 162847, 14.4, 28.0, 17.9, 6.3, 240.6);

CREATE TABLE county_health_2023 (
  fips TEXT PRIMARY KEY,
  county TEXT NOT NULL,
  state TEXT NOT NULL,
  population INTEGER,
  adult_smoking_pct REAL,
  adult_obesity_pct REAL,
  physical_inactivity_pct REAL,
  uninsured_pct REAL,
  primary_care_physicians_per_100k REAL
);
INSERT INTO county_health_2023 VALUES ('48201', 'Harris County', 'Texas', 4654699, 13.4, 28.8, 20.5, 20.3, 58.6);
INSERT INTO county_health_2023 VALUES ('48113', 'Dallas County', 'Texas', 2567964, 14.2, 32.2, 21.5, 18.9, 48.9);
INSERT INTO county_health_2023 VALUES ('48439', 'Tarrant County', 'Texas', 2132012, 10.8, 29.9, 22.0, 23.3, 47.9);
INSERT INTO county_health_2023 VALUES ('48029', 'Bexar County', 'Texas', 2046385, 11.3, 29.0, 24.7, 17.9, 56.6);
INSERT INTO county_health_2023 VALUES ('48453', 'Travis County', 'Texas', 1275169, 13.3, 33.3, 26.1, 12.7, 84.9);
INSERT INTO county_health_2023 VALUES ('48141', 'El Paso County', 'Texas', 870064, 13.3, 28.4, 25.8, 23.7, 56.4);
INSERT INTO county_health_2023 VALUES ('48215', 'Hidalgo County', 'Texas', 871842, 15.0, 39.3, 29.6, 30.9, 10.3);
INSERT INTO county_health_2023 VALUES ('48061', 'Cameron County', 'Texas', 432775, 16.0, 33.1, 25.5, 27.1, 11.1);
INSERT INTO county_health_2023 VALUES ('48479', 'Webb County', 'Texas', 275842, 16.0, 35.2, 30.0, 27.6, 39.9);
INSERT INTO county_health_2023 VALUES ('48303', 'Lubbock County', 'Texas', 314102, 12.0, 29.3, 22.2, 19.1, 55.8);
INSERT INTO county_health_2023 VALUES ('48085', 'Collin County', 'Texas', 1066147, 12.4, 34.0, 25.5, 12.5, 77.8);
INSERT INTO county_health_2023 VALUES ('48121', 'Denton County', 'Texas', 895834, 13.6, 28.6, 20.5, 11.2, 34.0);
INSERT INTO county_health_2023 VALUES ('06037', 'Los Angeles County', 'California', 10281298, 6.0, 23.6, 20.0, 5.1, 84.6);
INSERT INTO county_health_2023 VALUES ('06073', 'San Diego County', 'California', 3405193, 7.7, 24.3, 14.8, 10.1, 60.8);
INSERT INTO county_health_2023 VALUES ('06059', 'Orange County', 'California', 3152529, 8.2, 23.1, 14.7, 9.7, 82.7);
INSERT INTO county_health_2023 VALUES ('06001', 'Alameda County', 'California', 1717165, 9.2, 26.0, 17.6, 10.4, 72.6);
INSERT INTO county_health_2023 VALUES ('06075', 'San Francisco County', 'California', 901526, 7.2, 24.7, 16.1, 2.6, 120.8);
INSERT INTO county_health_2023 VALUES ('06019', 'Fresno County', 'California', 1015080, 10.4, 31.6, 21.1, 9.6, 47.9);
INSERT INTO county_health_2023 VALUES ('06029', 'Kern County', 'California', 907678, 9.2, 31.5, 22.3, 9.7, 78.3);
INSERT INTO county_health_2023 VALUES ('06085', 'Santa Clara County', 'California', 1983421, 8.1, 27.7, 16.7, 7.3, 130.8);
INSERT INTO county_health_2023 VALUES ('06067', 'Sacramento County', 'California', 1599260, 11.2, 26.6, 19.9, 6.5, 77.0);
INSERT INTO county_health_2023 VALUES ('06025', 'Imperial County', 'California', 180249, 13.4, 28.1, 24.1, 9.5, 42.6);
INSERT INTO county_health_2023 VALUES ('17031', 'Cook County', 'Illinois', 5321928, 11.5, 32.7, 20.8, 7.0, 84.5);
INSERT INTO county_health_2023 VALUES ('17043', 'DuPage County', 'Illinois', 940815, 10.8, 29.5, 18.1, 2.5, 112.6);
INSERT INTO county_health_2023 VALUES ('17097', 'Lake County', 'Illinois', 735905, 10.7, 32.4, 21.5, 7.2, 71.3);
INSERT INTO county_health_2023 VALUES ('17197', 'Will County', 'Illinois', 715998, 12.8, 30.8, 22.0, 7.2, 90.8);
INSERT INTO county_health_2023 VALUES ('17019', 'Champaign County', 'Illinois', 202575, 13.1, 27.6, 22.8, 8.7, 93.7);
INSERT INTO county_health_2023 VALUES ('12086', 'Miami-Dade County', 'Florida', 2789271, 14.7, 28.8, 21.9, 18.9, 78.0);
INSERT INTO county_health_2023 VALUES ('12011', 'Broward County', 'Florida', 1982714, 15.8, 27.4, 24.4, 13.9, 53.8);
INSERT INTO county_health_2023 VALUES ('12099', 'Palm Beach County', 'Florida', 1542094, 13.4, 27.8, 21.1, 12.6, 65.2);
INSERT INTO county_health_2023 VALUES ('12057', 'Hillsborough County', 'Florida', 1442559, 10.4, 25.7, 25.3, 11.5, 58.2);
INSERT INTO county_health_2023 VALUES ('12095', 'Orange County', 'Florida', 1464353, 14.7, 27.8, 21.4, 17.3, 51.7);
INSERT INTO county_health_2023 VALUES ('12031', 'Duval County', 'Florida', 1004507, 10.5, 30.0, 24.7, 12.0, 65.5);
INSERT INTO county_health_2023 VALUES ('36047', 'Kings County', 'New York', 2708123, 8.7, 22.9, 18.9, 3.7, 73.1);
INSERT INTO county_health_2023 VALUES ('36081', 'Queens County', 'New York', 2465698, 9.5, 22.0, 20.0, 5.0, 93.8);
INSERT INTO county_health_2023 VALUES ('36061', 'New York County', 'New York', 1719628, 12.6, 26.7, 22.0, 4.8, 178.5);
INSERT INTO county_health_2023 VALUES ('36005', 'Bronx County', 'New York', 1513710, 8.9, 24.5, 18.9, 5.8, 69.9);
INSERT INTO county_health_2023 VALUES ('36029', 'Erie County', 'New York', 963863, 9.7, 24.3, 21.7, 5.4, 88.5);
INSERT INTO county_health_2023 VALUES ('36055', 'Monroe County', 'New York', 744460, 9.7, 29.2, 20.5, 4.0, 64.1);
INSERT INTO county_health_2023 VALUES ('28049', 'Hinds County', 'Mississippi', 231423, 18.1, 35.1, 26.3, 11.8, 28.0);
INSERT INTO county_health_2023 VALUES ('28047', 'Harrison County', 'Mississippi', 214682, 18.0, 41.5, 27.0, 13.6, 72.0);
INSERT INTO county_health_2023 VALUES ('28033', 'DeSoto County', 'Mississippi', 190707, 19.9, 40.7, 27.5, 14.2, 49.2);
INSERT INTO county_health_2023 VALUES ('28011', 'Bolivar County', 'Mississippi', 31432, 19.9, 43.1, 30.3, 14.1, 13.0);
INSERT INTO county_health_2023 VALUES ('28151', 'Washington County', 'Mississippi', 44646, 19.0, 42.4, 33.9, 14.5, 35.6);
INSERT INTO county_health_2023 VALUES ('54039', 'Kanawha County', 'West Virginia', 184754, 23.0, 35.8, 26.2, 6.4, 82.8);
INSERT INTO county_health_2023 VALUES ('54047', 'McDowell County', 'West Virginia', 19011, 22.5, 42.1, 28.9, 8.4, 30.9);
INSERT INTO county_health_2023 VALUES ('54061', 'Monongalia County', 'West Virginia', 109398, 23.0, 38.7, 27.5, 7.9, 98.8);
INSERT INTO county_health_2023 VALUES ('54011', 'Cabell County', 'West Virginia', 95480, 21.8, 33.7, 30.8, 9.1, 89.3);
INSERT INTO county_health_2023 VALUES ('08031', 'Denver County', 'Colorado', 720342, 12.7, 21.8, 12.3, 6.3, 105.1);
INSERT INTO county_health_2023 VALUES ('08013', 'Boulder County', 'Colorado', 337799, 10.9, 17.2, 15.4, 2.5, 94.6);
INSERT INTO county_health_2023 VALUES ('08041', 'El Paso County', 'Colorado', 730277, 13.0, 18.1, 17.3, 9.2, 106.3);
INSERT INTO county_health_2023 VALUES ('08101', 'Pueblo County', 'Colorado', 166554, 11.7, 24.1, 16.1, 7.1, 77.6);
INSERT INTO county_health_2023 VALUES ('13121', 'Fulton County', 'Georgia', 1088342, 16.1, 34.9, 26.3, 15.7, 64.8);
INSERT INTO county_health_2023 VALUES ('13089', 'DeKalb County', 'Georgia', 780164, 15.0, 32.1, 22.4, 16.1, 40.6);
INSERT INTO county_health_2023 VALUES ('13135', 'Gwinnett County', 'Georgia', 964086, 15.4, 28.7, 22.2, 19.2, 63.3);
INSERT INTO county_health_2023 VALUES ('13051', 'Chatham County', 'Georgia', 293581, 16.9, 33.1, 22.9, 12.8, 44.2);
INSERT INTO county_health_2023 VALUES ('13095', 'Dougherty County', 'Georgia', 88640, 18.6, 37.5, 26.6, 15.5, 31.8);
INSERT INTO county_health_2023 VALUES ('21111', 'Jefferson County', 'Kentucky', 803856, 21.5, 34.5, 30.1, 3.5, 57.3);
INSERT INTO county_health_2023 VALUES ('21067', 'Fayette County', 'Kentucky', 330765, 19.0, 31.8, 29.0, 7.9, 112.7);
INSERT INTO county_health_2023 VALUES ('21195', 'Pike County', 'Kentucky', 59963, 21.9, 42.6, 30.1, 7.9, 27.1);
INSERT INTO county_health_2023 VALUES ('27053', 'Hennepin County', 'Minnesota', 1300783, 9.6, 28.6, 18.9, 4.1, 93.5);
INSERT INTO county_health_2023 VALUES ('27123', 'Ramsey County', 'Minnesota', 555300, 9.4, 24.8, 17.2, 4.8, 94.6);
INSERT INTO county_health_2023 VALUES ('27109', 'Olmsted County', 'Minnesota', 164053, 13.4, 29.7, 17.5, 4.6, 236.7);
