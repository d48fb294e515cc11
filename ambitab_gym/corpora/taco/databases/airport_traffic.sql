CREATE TABLE enplanements_2019 (
  airport_code TEXT PRIMARY KEY,
  airport_name TEXT NOT NULL,
  city TEXT,
  state TEXT,
  hub_size TEXT,
  enplanements INTEGER
);
INSERT INTO enplanements_2019 VALUES ('ATL', 'Hartsfield-Jackson Atlanta International', 'Atlanta', 'GA', 'large', 53517411);
INSERT INTO enplanements_2019 VALUES ('LAX', 'Los Angeles International', 'Los Angeles', 'CA', 'large', 42949171);
INSERT INTO enplanements_2019 VALUES ('ORD', 'Chicago O''Hare International', 'Chicago', 'IL', 'large', 40877629);
INSERT INTO enplanements_2019 VALUES ('DFW', 'Dallas/Fort Worth International', 'Dallas-Fort Worth', 'TX', 'large', 35787402);
INSERT INTO enplanements_2019 VALUES ('DEN', 'Denver International', 'Denver', 'CO', 'large', 33598320);
INSERT INTO enplanements_2019 VALUES ('JFK', 'John F. Kennedy International', 'New York', 'NY', 'large', 31049623);
INSERT INTO enplanements_2019 VALUES ('SFO', 'San Francisco International', 'San Francisco', 'CA', 'large', 27783111);
INSERT INTO enplanements_2019 VALUES ('SEA', 'Seattle-Tacoma International', 'Seattle', 'WA', 'large', 25001800);
INSERT INTO enplanements_2019 VALUES ('LAS', 'Harry Reid International', 'Las Vegas', 'NV', 'large', 24733025);
INSERT INTO enplanements_2019 VALUES ('MCO', 'Orlando International', 'Orlando', 'FL', 'large', 24568387);
INSERT INTO enplanements_2019 VALUES ('EWR', 'Newark Liberty International', 'Newark', 'NJ', 'large', 23167794);
INSERT INTO enplanements_2019 VALUES ('CLT', 'Charlotte Douglas International', 'Charlotte', 'NC', 'large', 24203050);
INSERT INTO enplanements_2019 VALUES ('PHX', 'Phoenix Sky Harbor International', 'Phoenix', 'AZ', 'large', 22431542);
INSERT INTO enplanements_2019 VALUES ('IAH', 'George Bush Intercontinental', 'Houston', 'TX', 'large', 21917316);
INSERT INTO enplanements_2019 VALUES ('MIA', 'Miami International', 'Miami', 'FL', 'large', 21424970);
INSERT INTO enplanements_2019 VALUES ('BOS', 'Boston Logan International', 'Boston', 'MA', 'large', 20702323);
INSERT INTO enplanements_2019 VALUES ('MSP', 'Minneapolis-Saint Paul International', 'Minneapolis', 'MN', 'large', 19221485);
INSERT INTO enplanements_2019 VALUES ('FLL', 'Fort Lauderdale-Hollywood International', 'Fort Lauderdale', 'FL', 'large', 17958825);
INSERT INTO enplanements_2019 VALUES ('DTW', 'Detroit Metropolitan Wayne County', 'Detroit', 'MI', 'large', 18140686);
INSERT INTO enplanements_2019 VALUES ('PHL', 'Philadelphia International', 'Philadelphia', 'PA', 'large', 16019755);
INSERT INTO enplanements_2019 VALUES ('LGA', 'LaGuardia', 'New York', 'NY', 'large', 15396490);
INSERT INTO enplanements_2019 VALUES ('BWI', 'Baltimore/Washington International Thurgood Marshall', 'Baltimore', 'MD', 'large', 13247421);
INSERT INTO enplanements_2019 VALUES ('SLC', 'Salt Lake City International', 'Salt Lake City', 'UT', 'large', 12892580);
INSERT INTO enplanements_2019 VALUES ('SAN', 'San Diego International', 'San Diego', 'CA', 'large', 12650245);
INSERT INTO enplanements_2019 VALUES ('IAD', 'Washington Dulles International', 'Dulles', 'VA', 'large', 11888656);
INSERT INTO enplanements_2019 VALUES ('DCA', 'Ronald Reagan Washington National', 'Arlington', 'VA', 'large', 11831034);
INSERT INTO enplanements_2019 VALUES ('TPA', 'Tampa International', 'Tampa', 'FL', 'large', 11010975);
INSERT INTO enplanements_2019 VALUES ('MDW', 'Chicago Midway International', 'Chicago', 'IL', 'large', 10110584);
INSERT INTO enplanements_2019 VALUES ('HNL', 'Daniel K. Inouye International', 'Honolulu', 'HI', 'large', 10073116);
INSERT INTO enplanements_2019 VALUES ('BNA', 'Nashville International', 'Nashville', 'TN', 'medium', 9013963);
INSERT INTO enplanements_2019 VALUES ('AUS', 'Austin-Bergstrom International', 'Austin', 'TX', 'medium', 8519824);
INSERT INTO enplanements_2019 VALUES ('PDX', 'Portland International', 'Portland', 'OR', 'large', 9800492);
INSERT INTO enplanements_2019 VALUES ('STL', 'St. Louis Lambert International', 'St. Louis', 'MO', 'medium', 7637601);
INSERT INTO enplanements_2019 VALUES ('RDU', 'Raleigh-Durham International', 'Raleigh-Durham', 'NC', 'medium', 7125345);
INSERT INTO enplanements_2019 VALUES ('HOU', 'William P. Hobby', 'Houston', 'TX', 'medium', 7077217);
INSERT INTO enplanements_2019 VALUES ('SJC', 'San Jose Mineta International', 'San Jose', 'CA', 'medium', 7039682);
INSERT INTO enplanements_2019 VALUES ('MSY', 'Louis Armstrong New Orleans International', 'New Orleans', 'LA', 'medium', 6813200);
INSERT INTO enplanements_2019 VALUES ('OAK', 'Oakland International', 'Oakland', 'CA', 'medium', 6548505);
INSERT INTO enplanements_2019 VALUES ('SMF', 'Sacramento International', 'Sacramento', 'CA', 'medium', 6423828);

CREATE TABLE enplanements_2021 (
  airport_code TEXT PRIMARY KEY,
  airport_name TEXT NOT NULL,
  city TEXT,
  state TEXT,
  hub_size TEXT,
  enplanements INTEGER
);
INSERT INTO enplanements_2021 VALUES ('ATL', 'Hartsfield-Jackson Atlanta International', 'Atlanta', 'GA', 'large', 36684819);
INSERT INTO enplanements_2021 VALUES ('LAX', 'Los Angeles International', 'Los Angeles', 'CA', 'large', 23668188);
INSERT INTO enplanements_2021 VALUES ('ORD', 'Chicago O''Hare International', 'Chicago', 'IL', 'large', 26350075);
INSERT INTO enplanements_2021 VALUES ('DFW', 'Dallas/Fort Worth International', 'Dallas-Fort Worth', 'TX', 'large', 30011392);
INSERT INTO enplanements_2021 VALUES ('DEN', 'Denver International', 'Denver', 'CO', 'large', 28657492);
INSERT INTO enplanements_2021 VALUES ('JFK', 'John F. Kennedy International', 'New York', 'NY', 'large', 15274557);
INSERT INTO enplanements_2021 VALUES ('SFO', 'San Francisco International', 'San Francisco', 'CA', 'large', 11236664);
INSERT INTO enplanements_2021 VALUES ('SEA', 'Seattle-Tacoma International', 'Seattle', 'WA', 'large', 17069031);
INSERT INTO enplanements_2021 VALUES ('LAS', 'Harry Reid International', 'Las Vegas', 'NV', 'large', 19161363);
INSERT INTO enplanements_2021 VALUES ('MCO', 'Orlando International', 'Orlando', 'FL', 'large', 19624161);
INSERT INTO enplanements_2021 VALUES ('EWR', 'Newark Liberty International', 'Newark', 'NJ', 'large', 14515165);
INSERT INTO enplanements_2021 VALUES ('CLT', 'Charlotte Douglas International', 'Charlotte', 'NC', 'large', 20943762);
INSERT INTO enplanements_2021 VALUES ('PHX', 'Phoenix Sky Harbor International', 'Phoenix', 'AZ', 'large', 18948403);
INSERT INTO enplanements_2021 VALUES ('IAH', 'George Bush Intercontinental', 'Houston', 'TX', 'large', 16244735);
INSERT INTO enplanements_2021 VALUES ('MIA', 'Miami International', 'Miami', 'FL', 'large', 17370487);
INSERT INTO enplanements_2021 VALUES ('BOS', 'Boston Logan International', 'Boston', 'MA', 'large', 10911150);
INSERT INTO enplanements_2021 VALUES ('MSP', 'Minneapolis-Saint Paul International', 'Minneapolis', 'MN', 'large', 12219226);
INSERT INTO enplanements_2021 VALUES ('FLL', 'Fort Lauderdale-Hollywood International', 'Fort Lauderdale', 'FL', 'large', 13601768);
INSERT INTO enplanements_2021 VALUES ('DTW', 'Detroit Metropolitan Wayne County', 'Detroit', 'MI', 'large', 11426560);
INSERT INTO enplanements_2021 VALUES ('PHL', 'Philadelphia International', 'Philadelphia', 'PA', 'large', 9521766);
INSERT INTO enplanements_2021 VALUES ('LGA', 'LaGuardia', 'New York', 'NY', 'large', 7834766);
INSERT INTO enplanements_2021 VALUES ('BWI', 'Baltimore/Washington International Thurgood Marshall', 'Baltimore', 'MD', 'large', 9116332);
INSERT INTO enplanements_2021 VALUES ('SLC', 'Salt Lake City International', 'Salt Lake City', 'UT', 'large', 11221094);
INSERT INTO enplanements_2021 VALUES ('SAN', 'San Diego International', 'San Diego', 'CA', 'large', 7820276);
INSERT INTO enplanements_2021 VALUES ('IAD', 'Washington Dulles International', 'Dulles', 'VA', 'medium', 6290008);
INSERT INTO enplanements_2021 VALUES ('DCA', 'Ronald Reagan Washington National', 'Arlington', 'VA', 'large', 6643498);
INSERT INTO enplanements_2021 VALUES ('TPA', 'Tampa International', 'Tampa', 'FL', 'large', 10293436);
INSERT INTO enplanements_2021 VALUES ('MDW', 'Chicago Midway International', 'Chicago', 'IL', 'large', 7310857);
INSERT INTO enplanements_2021 VALUES ('HNL', 'Daniel K. Inouye International', 'Honolulu', 'HI', 'medium', 5627700);
INSERT INTO enplanements_2021 VALUES ('BNA', 'Nashville International', 'Nashville', 'TN', 'large', 7636151);
INSERT INTO enplanements_2021 VALUES ('AUS', 'Austin-Bergstrom International', 'Austin', 'TX', 'large', 6936511);
INSERT INTO enplanements_2021 VALUES ('PDX', 'Portland International', 'Portland', 'OR', 'medium', 5776877);
INSERT INTO enplanements_2021 VALUES ('STL', 'St. Louis Lambert International', 'St. Louis', 'MO', 'medium', 5021196);
INSERT INTO enplanements_2021 VALUES ('RDU', 'Raleigh-Durham International', 'Raleigh-Durham', 'NC', 'medium', 4619277);
INSERT INTO enplanements_2021 VALUES ('HOU', 'William P. Hobby', 'Houston', 'TX', 'medium', 4873252);
INSERT INTO enplanements_2021 VALUES ('SJC', 'San Jose Mineta International', 'San Jose', 'CA', 'medium', 2714420);
INSERT INTO enplanements_2021 VALUES ('MSY', 'Louis Armstrong New Orleans International', 'New Orleans', 'LA', 'medium', 4495519);
INSERT INTO enplanements_2021 VALUES ('OAK', 'Oakland International', 'Oakland', 'CA', 'medium', 4271427);
INSERT INTO enplanements_2021 VALUES ('SMF', 'Sacramento International', 'Sacramento', 'CA', 'medium', 4415098);

CREATE TABLE enplanements_2022 (
  airport_code TEXT PRIMARY KEY,
  airport_name TEXT NOT NULL,
  city TEXT,
  state TEXT,
  hub_size TEXT,
  enplanements INTEGER
);
INSERT INTO enplanements_2022 VALUES ('ATL', 'Hartsfield-Jackson Atlanta International', 'Atlanta', 'GA', 'large', 45405449);
INSERT INTO enplanements_2022 VALUES ('LAX', 'Los Angeles International', 'Los Angeles', 'CA', 'large', 32330248);
INSERT INTO enplanements_2022 VALUES ('ORD', 'Chicago O''Hare International', 'Chicago', 'IL', 'large', 33126718);
INSERT INTO enplanements_2022 VALUES ('DFW', 'Dallas/Fort Worth International', 'Dallas-Fort Worth', 'TX', 'large', 35351933);
INSERT INTO enplanements_2022 VALUES ('DEN', 'Denver International', 'Denver', 'CO', 'large', 33772205);
INSERT INTO enplanements_2022 VALUES ('JFK', 'John F. Kennedy International', 'New York', 'NY', 'large', 26924036);
INSERT INTO enplanements_2022 VALUES ('SFO', 'San Francisco International', 'San Francisco', 'CA', 'large', 20411655);
INSERT INTO enplanements_2022 VALUES ('SEA', 'Seattle-Tacoma International', 'Seattle', 'WA', 'large', 22160179);
INSERT INTO enplanements_2022 VALUES ('LAS', 'Harry Reid International', 'Las Vegas', 'NV', 'large', 25330981);
INSERT INTO enplanements_2022 VALUES ('MCO', 'Orlando International', 'Orlando', 'FL', 'large', 24487617);
INSERT INTO enplanements_2022 VALUES ('EWR', 'Newark Liberty International', 'Newark', 'NJ', 'large', 21577976);
INSERT INTO enplanements_2022 VALUES ('CLT', 'Charlotte Douglas International', 'Charlotte', 'NC', 'large', 23602911);
INSERT INTO enplanements_2022 VALUES ('PHX', 'Phoenix Sky Harbor International', 'Phoenix', 'AZ', 'large', 21859163);
INSERT INTO enplanements_2022 VALUES ('IAH', 'George Bush Intercontinental', 'Houston', 'TX', 'large', 19813086);
INSERT INTO enplanements_2022 VALUES ('MIA', 'Miami International', 'Miami', 'FL', 'large', 24227330);
INSERT INTO enplanements_2022 VALUES ('BOS', 'Boston Logan International', 'Boston', 'MA', 'large', 17448337);
INSERT INTO enplanements_2022 VALUES ('MSP', 'Minneapolis-Saint Paul International', 'Minneapolis', 'MN', 'large', 15243124);
INSERT INTO enplanements_2022 VALUES ('FLL', 'Fort Lauderdale-Hollywood International', 'Fort Lauderdale', 'FL', 'large', 15392145);
INSERT INTO enplanements_2022 VALUES ('DTW', 'Detroit Metropolitan Wayne County', 'Detroit', 'MI', 'large', 13896868);
INSERT INTO enplanements_2022 VALUES ('PHL', 'Philadelphia International', 'Philadelphia', 'PA', 'large', 12406287);
INSERT INTO enplanements_2022 VALUES ('LGA', 'LaGuardia', 'New York', 'NY', 'large', 14371908);
INSERT INTO enplanements_2022 VALUES ('BWI', 'Baltimore/Washington International Thurgood Marshall', 'Baltimore', 'MD', 'large', 11456469);
INSERT INTO enplanements_2022 VALUES ('SLC', 'Salt Lake City International', 'Salt Lake City', 'UT', 'large', 12486893);
INSERT INTO enplanements_2022 VALUES ('SAN', 'San Diego International', 'San Diego', 'CA', 'large', 11113487);
INSERT INTO enplanements_2022 VALUES ('IAD', 'Washington Dulles International', 'Dulles', 'VA', 'large', 10230007);
INSERT INTO enplanements_2022 VALUES ('DCA', 'Ronald Reagan Washington National', 'Arlington', 'VA', 'large', 11574420);
INSERT INTO enplanements_2022 VALUES ('TPA', 'Tampa International', 'Tampa', 'FL', 'large', 11629711);
INSERT INTO enplanements_2022 VALUES ('MDW', 'Chicago Midway International', 'Chicago', 'IL', 'large', 9634983);
INSERT INTO enplanements_2022 VALUES ('HNL', 'Daniel K. Inouye International', 'Honolulu', 'HI', 'large', 8630321);
INSERT INTO enplanements_2022 VALUES ('BNA', 'Nashville International', 'Nashville', 'TN', 'large', 10193452);
INSERT INTO enplanements_2022 VALUES ('AUS', 'Austin-Bergstrom International', 'Austin', 'TX', 'large', 10473068);
INSERT INTO enplanements_2022 VALUES ('PDX', 'Portland International', 'Portland', 'OR', 'medium', 7996459);
INSERT INTO enplanements_2022 VALUES ('STL', 'St. Louis Lambert International', 'St. Louis', 'MO', 'medium', 6629863);
INSERT INTO enplanements_2022 VALUES ('RDU', 'Raleigh-Durham International', 'Raleigh-Durham', 'NC', 'medium', 6919452);
INSERT INTO enplanements_2022 VALUES ('HOU', 'William P. Hobby', 'Houston', 'TX', 'medium', 6131643);
INSERT INTO enplanements_2022 VALUES ('SJC', 'San Jose Mineta International', 'San Jose', 'CA', 'medium', 4920689);
INSERT INTO enplanements_2022 VALUES ('MSY', 'Louis Armstrong New Orleans International', 'New Orleans', 'LA', 'medium', 6242397);
INSERT INTO enplanements_2022 VALUES ('OAK', 'Oakland International', 'Oakland', 'CA', 'medium', 5513493);
INSERT INTO enplanements_2022 VALUES ('SMF', 'Sacramento International', 'Sacramento', 'CA', 'medium', 6027234);
