CREATE TABLE population_2019 (
  state TEXT NOT NULL,
  state_code TEXT NOT NULL,
  region TEXT,
  division TEXT,
  population INTEGER
);
INSERT INTO population_2019 VALUES ('Alabama', 'AL', 'South', 'East South Central', 4903185);
INSERT INTO population_2019 VALUES ('Alaska', 'AK', 'West', 'Pacific', 731545);
INSERT INTO population_2019 VALUES ('Arizona', 'AZ', 'West', 'Mountain', 7278717);
INSERT INTO population_2019 VALUES ('Arkansas', 'AR', 'South', 'West South Central', 3017804);
INSERT INTO population_2019 VALUES ('California', 'CA', 'West', 'Pacific', 39512223);
INSERT INTO population_2019 VALUES ('Colorado', 'CO', 'West', 'Mountain', 5758736);
INSERT INTO population_2019 VALUES ('Connecticut', 'CT', 'Northeast', 'New England', 3565287);
INSERT INTO population_2019 VALUES ('Delaware', 'DE', 'South', 'South Atlantic', 973764);
INSERT INTO population_2019 VALUES ('District of Columbia', 'DC', 'South', 'South Atlantic', 705749);
INSERT INTO population_2019 VALUES ('Florida', 'FL', 'South', 'South Atlantic', 21477737);
INSERT INTO population_2019 VALUES ('Georgia', 'GA', 'South', 'South Atlantic', 10617423);
INSERT INTO population_2019 VALUES ('Hawaii', 'HI', 'West', 'Pacific', 1415872);
INSERT INTO population_2019 VALUES ('Idaho', 'ID', 'West', 'Mountain', 1787065);
INSERT INTO population_2019 VALUES ('Illinois', 'IL', 'Midwest', 'East North Central', 12671821);
INSERT INTO population_2019 VALUES ('Indiana', 'IN', 'Midwest', 'East North Central', 6732219);
INSERT INTO population_2019 VALUES ('Iowa', 'IA', 'Midwest', 'West North Central', 3155070);
INSERT INTO population_2019 VALUES ('Kansas', 'KS', 'Midwest', 'West North Central', 2913314);
INSERT INTO population_2019 VALUES ('Kentucky', 'KY', 'South', 'East South Central', 4467673);
INSERT INTO population_2019 VALUES ('Louisiana', 'LA', 'South', 'West South Central', 4648794);
INSERT INTO population_2019 VALUES ('Maine', 'ME', 'Northeast', 'New England', 1344212);
INSERT INTO population_2019 VALUES ('Maryland', 'MD', 'South', 'South Atlantic', 6045680);
INSERT INTO population_2019 VALUES ('Massachusetts', 'MA', 'Northeast', 'New England', 6892503);
INSERT INTO population_2019 VALUES ('Michigan', 'MI', 'Midwest', 'East North Central', 9986857);
INSERT INTO population_2019 VALUES ('Minnesota', 'MN', 'Midwest', 'West North Central', 5639632);
INSERT INTO population_2019 VALUES ('Mississippi', 'MS', 'South', 'East South Central', 2976149);
INSERT INTO population_2019 VALUES ('Missouri', 'MO', 'Midwest', 'West North Central', 6137428);
INSERT INTO population_2019 VALUES ('Montana', 'MT', 'West', 'Mountain', 1068778);
INSERT INTO population_2019 VALUES ('Nebraska', 'NE', 'Midwest', 'West North Central', 1934408);
INSERT INTO population_2019 VALUES ('Nevada', 'NV', 'West', 'Mountain', 3080156);
INSERT INTO population_2019 VALUES ('New Hampshire', 'NH', 'Northeast', 'New England', 1359711);
INSERT INTO population_2019 VALUES ('New Jersey', 'NJ', 'Northeast', 'Middle Atlantic', 8882190);
INSERT INTO population_2019 VALUES ('New Mexico', 'NM', 'West', 'Mountain', 2096829);
INSERT INTO population_2019 VALUES ('New York', 'NY', 'Northeast', 'Middle Atlantic', 19453561);
INSERT INTO population_2019 VALUES ('North Carolina', 'NC', 'South', 'South Atlantic', 10488084);
INSERT INTO population_2019 VALUES ('North Dakota', 'ND', 'Midwest', 'West North Central', 762062);
INSERT INTO population_2019 VALUES ('Ohio', 'OH', 'Midwest', 'East North Central', 11689100);
INSERT INTO population_2019 VALUES ('Oklahoma', 'OK', 'South', 'West South Central', 3956971);
INSERT INTO population_2019 VALUES ('Oregon', 'OR', 'West', 'Pacific', 4217737);
INSERT INTO population_2019 VALUES ('Pennsylvania', 'PA', 'Northeast', 'Middle Atlantic', 12801989);
INSERT INTO population_2019 VALUES ('Rhode Island', 'RI', 'Northeast', 'New England', 1059361);
INSERT INTO population_2019 VALUES ('South Carolina', 'SC', 'South', 'South Atlantic', 5148714);
INSERT INTO population_2019 VALUES ('South Dakota', 'SD', 'Midwest', 'West North Central', 884659);
INSERT INTO population_2019 VALUES ('Tennessee', 'TN', 'South', 'East South Central', 6829174);
INSERT INTO population_2019 VALUES ('Texas', 'TX', 'South', 'West South Central', 28995881);
INSERT INTO population_2019 VALUES ('Utah', 'UT', 'West', 'Mountain', 3205958);
INSERT INTO population_2019 VALUES ('Vermont', 'VT', 'Northeast', 'New England', 623989);
INSERT INTO population_2019 VALUES ('Virginia', 'VA', 'South', 'South Atlantic', 8535519);
INSERT INTO population_2019 VALUES ('Washington', 'WA', 'West', 'Pacific', 7614893);
INSERT INTO population_2019 VALUES ('West Virginia', 'WV', 'South', 'South Atlantic', 1792147);
INSERT INTO population_2019 VALUES ('Wisconsin', 'WI', 'Midwest', 'East North Central', 5822434);
INSERT INTO population_2019 VALUES ('Wyoming', 'WY', 'West', 'Mountain', 578759);

CREATE TABLE population_2020 (
  state TEXT NOT NULL,
  state_code TEXT NOT NULL,
  region TEXT,
  division TEXT,
  population INTEGER
);
INSERT INTO population_2020 VALUES ('Alabama', 'AL', 'South', 'East South Central', 5024279);
INSERT INTO population_2020 VALUES ('Alaska', 'AK', 'West', 'Pacific', 733391);
INSERT INTO population_2020 VALUES ('Arizona', 'AZ', 'West', 'Mountain', 7151502);
INSERT INTO population_2020 VALUES ('Arkansas', 'AR', 'South', 'West South Central', 3011524);
INSERT INTO population_2020 VALUES ('California', 'CA', 'West', 'Pacific', 39538223);
INSERT INTO population_2020 VALUES ('Colorado', 'CO', 'West', 'Mountain', 5773714);
INSERT INTO population_2020 VALUES ('Connecticut', 'CT', 'Northeast', 'New England', 3605944);
INSERT INTO population_2020 VALUES ('Delaware', 'DE', 'South', 'South Atlantic', 989948);
INSERT INTO population_2020 VALUES ('District of Columbia', 'DC', 'South', 'South Atlantic', 689545);
INSERT INTO population_2020 VALUES ('Florida', 'FL', 'South', 'South Atlantic', 21538187);
INSERT INTO population_2020 VALUES ('Georgia', 'GA', 'South', 'South Atlantic', 10711908);
INSERT INTO population_2020 VALUES ('Hawaii', 'HI', 'West', 'Pacific', 1455271);
INSERT INTO population_2020 VALUES ('Idaho', 'ID', 'West', 'Mountain', 1839106);
INSERT INTO population_2020 VALUES ('Illinois', 'IL', 'Midwest', 'East North Central', 12812508);
INSERT INTO population_2020 VALUES ('Indiana', 'IN', 'Midwest', 'East North Central', 6785528);
INSERT INTO population_2020 VALUES ('Iowa', 'IA', 'Midwest', 'West North Central', 3190369);
INSERT INTO population_2020 VALUES ('Kansas', 'KS', 'Midwest', 'West North Central', 2937880);
INSERT INTO population_2020 VALUES ('Kentucky', 'KY', 'South', 'East South Central', 4505836);
INSERT INTO population_2020 VALUES ('Louisiana', 'LA', 'South', 'West South Central', 4657757);
INSERT INTO population_2020 VALUES ('Maine', 'ME', 'Northeast', 'New England', 1362359);
INSERT INTO population_2020 VALUES ('Maryland', 'MD', 'South', 'South Atlantic', 6177224);
INSERT INTO population_2020 VALUES ('Massachusetts', 'MA', 'Northeast', 'New England', 7029917);
INSERT INTO population_2020 VALUES ('Michigan', 'MI', 'Midwest', 'East North Central', 10077331);
INSERT INTO population_2020 VALUES ('Minnesota', 'MN', 'Midwest', 'West North Central', 5706494);
INSERT INTO population_2020 VALUES ('Mississippi', 'MS', 'South', 'East South Central', 2961279);
INSERT INTO population_2020 VALUES ('Missouri', 'MO', 'Midwest', 'West North Central', 6154913);
INSERT INTO population_2020 VALUES ('Montana', 'MT', 'West', 'Mountain', 1084225);
INSERT INTO population_2020 VALUES ('Nebraska', 'NE', 'Midwest', 'West North Central', 1961504);
INSERT INTO population_2020 VALUES ('Nevada', 'NV', 'West', 'Mountain', 3104614);
INSERT INTO population_2020 VALUES ('New Hampshire', 'NH', 'Northeast', 'New England', 1377529);
INSERT INTO population_2020 VALUES ('New Jersey', 'NJ', 'Northeast', 'Middle Atlantic', 9288994);
INSERT INTO population_2020 VALUES ('New Mexico', 'NM', 'West', 'Mountain', 2117522);
INSERT INTO population_2020 VALUES ('New York', 'NY', 'Northeast', 'Middle Atlantic', 20201249);
INSERT INTO population_2020 VALUES ('North Carolina', 'NC', 'South', 'South Atlantic', 10439388);
INSERT INTO population_2020 VALUES ('North Dakota', 'ND', 'Midwest', 'West North Central', 779094);
INSERT INTO population_2020 VALUES ('Ohio', 'OH', 'Midwest', 'East North Central', 11799448);
INSERT INTO population_2020 VALUES ('Oklahoma', 'OK', 'South', 'West South Central', 3959353);
INSERT INTO population_2020 VALUES ('Oregon', 'OR', 'West', 'Pacific', 4237256);
INSERT INTO population_2020 VALUES ('Pennsylvania', 'PA', 'Northeast', 'Middle Atlantic', 13002700);
INSERT INTO population_2020 VALUES ('Rhode Island', 'RI', 'Northeast', 'New England', 1097379);
INSERT INTO population_2020 VALUES ('South Carolina', 'SC', 'South', 'South Atlantic', 5118425);
INSERT INTO population_2020 VALUES ('South Dakota', 'SD', 'Midwest', 'West North Central', 886667);
INSERT INTO population_2020 VALUES ('Tennessee', 'TN', 'South', 'East South Central', 6910840);
INSERT INTO population_2020 VALUES ('Texas', 'TX', 'South', 'West South Central', 29145505);
INSERT INTO population_2020 VALUES ('Utah', 'UT', 'West', 'Mountain', 3271616);
INSERT INTO population_2020 VALUES ('Vermont', 'VT', 'Northeast', 'New England', 643077);
INSERT INTO population_2020 VALUES ('Virginia', 'VA', 'South', 'South Atlantic', 8631393);
INSERT INTO population_2020 VALUES ('Washington', 'WA', 'West', 'Pacific', 7705281);
INSERT INTO population_2020 VALUES ('West Virginia', 'WV', 'South', 'South Atlantic', 1793716);
INSERT INTO population_2020 VALUES ('Wisconsin', 'WI', 'Midwest', 'East North Central', 5893718);
INSERT INTO population_2020 VALUES ('Wyoming', 'WY', 'West', 'Mountain', 576851);

CREATE TABLE population_2022 (
  state TEXT NOT NULL,
  state_code TEXT NOT NULL,
  region TEXT,
  division TEXT,
  population INTEGER
);
INSERT INTO population_2022 VALUES ('Alabama', 'AL', 'South', 'East South Central', 5074296);
INSERT INTO population_2022 VALUES ('Alaska', 'AK', 'West', 'Pacific', 733583);
INSERT INTO population_2022 VALUES ('Arizona', 'AZ', 'West', 'Mountain', 7359197);
INSERT INTO population_2022 VALUES ('Arkansas', 'AR', 'South', 'West South Central', 3045637);
INSERT INTO population_2022 VALUES ('California', 'CA', 'West', 'Pacific', 39029342);
INSERT INTO population_2022 VALUES ('Colorado', 'CO', 'West', 'Mountain', 5839926);
INSERT INTO population_2022 VALUES ('Connecticut', 'CT', 'Northeast', 'New England', 3626205);
INSERT INTO population_2022 VALUES ('Delaware', 'DE', 'South', 'South Atlantic', 1018396);
INSERT INTO population_2022 VALUES ('District of Columbia', 'DC', 'South', 'South Atlantic', 671803);
INSERT INTO population_2022 VALUES ('Florida', 'FL', 'South', 'South Atlantic', 22244823);
INSERT INTO population_2022 VALUES ('Georgia', 'GA', 'South', 'South Atlantic', 10912876);
INSERT INTO population_2022 VALUES ('Hawaii', 'HI', 'West', 'Pacific', 1440196);
INSERT INTO population_2022 VALUES ('Idaho', 'ID', 'West', 'Mountain', 1939033);
INSERT INTO population_2022 VALUES ('Illinois', 'IL', 'Midwest', 'East North Central', 12582032);
INSERT INTO population_2022 VALUES ('Indiana', 'IN', 'Midwest', 'East North Central', 6833037);
INSERT INTO population_2022 VALUES ('Iowa', 'IA', 'Midwest', 'West North Central', 3200517);
INSERT INTO population_2022 VALUES ('Kansas', 'KS', 'Midwest', 'West North Central', 2937150);
INSERT INTO population_2022 VALUES ('Kentucky', 'KY', 'South', 'East South Central', 4512310);
INSERT INTO population_2022 VALUES ('Louisiana', 'LA', 'South', 'West South Central', 4590241);
INSERT INTO population_2022 VALUES ('Maine', 'ME', 'Northeast', 'New England', 1385340);
INSERT INTO population_2022 VALUES ('Maryland', 'MD', 'South', 'South Atlantic', 6164660);
INSERT INTO population_2022 VALUES ('Massachusetts', 'MA', 'Northeast', 'New England', 6981974);
INSERT INTO population_2022 VALUES ('Michigan', 'MI', 'Midwest', 'East North Central', 10034113);
INSERT INTO population_2022 VALUES ('Minnesota', 'MN', 'Midwest', 'West North Central', 5717184);
INSERT INTO population_2022 VALUES ('Mississippi', 'MS', 'South', 'East South Central', 2940057);
INSERT INTO population_2022 VALUES ('Missouri', 'MO', 'Midwest', 'West North Central', 6177957);
INSERT INTO population_2022 VALUES ('Montana', 'MT', 'West', 'Mountain', 1122867);
INSERT INTO population_2022 VALUES ('Nebraska', 'NE', 'Midwest', 'West North Central', 1967923);
INSERT INTO population_2022 VALUES ('Nevada', 'NV', 'West', 'Mountain', 3177772);
INSERT INTO population_2022 VALUES ('New Hampshire', 'NH', 'Northeast', 'New England', 1395231);
INSERT INTO population_2022 VALUES ('New Jersey', 'NJ', 'Northeast', 'Middle Atlantic', 9261699);
INSERT INTO population_2022 VALUES ('New Mexico', 'NM', 'West', 'Mountain', 2113344);
INSERT INTO population_2022 VALUES ('New York', 'NY', 'Northeast', 'Middle Atlantic', 19677151);
INSERT INTO population_2022 VALUES ('North Carolina', 'NC', 'South', 'South Atlantic', 10698973);
INSERT INTO population_2022 VALUES ('North Dakota', 'ND', 'Midwest', 'West North Central', 779261);
INSERT INTO population_2022 VALUES ('Ohio', 'OH', 'Midwest', 'East North Central', 11756058);
INSERT INTO population_2022 VALUES ('Oklahoma', 'OK', 'South', 'West South Central', 4019800);
INSERT INTO population_2022 VALUES ('Oregon', 'OR', 'West', 'Pacific', 4240137);
INSERT INTO population_2022 VALUES ('Pennsylvania', 'PA', 'Northeast', 'Middle Atlantic', 12972008);
INSERT INTO population_2022 VALUES ('Rhode Island', 'RI', 'Northeast', 'New England', 1093734);
INSERT INTO population_2022 VALUES ('South Carolina', 'SC', 'South', 'South Atlantic', 5282634);
INSERT INTO population_2022 VALUES ('South Dakota', 'SD', 'Midwest', 'West North Central', 909824);
INSERT INTO population_2022 VALUES ('Tennessee', 'TN', 'South', 'East South Central', 7051339);
INSERT INTO population_2022 VALUES ('Texas', 'TX', 'South', 'West South Central', 30029572);
INSERT INTO population_2022 VALUES ('Utah', 'UT', 'West', 'Mountain', 3380800);
INSERT INTO population_2022 VALUES ('Vermont', 'VT', 'Northeast', 'New England', 647064);
INSERT INTO population_2022 VALUES ('Virginia', 'VA', 'South', 'South Atlantic', 8683619);
INSERT INTO population_2022 VALUES ('Washington', 'WA', 'West', 'Pacific', 7785786);
INSERT INTO population_2022 VALUES ('West Virginia', 'WV', 'South', 'South Atlantic', 1775156);
INSERT INTO population_2022 VALUES ('Wisconsin', 'WI', 'Midwest', 'East North Central', 5892539);
INSERT INTO population_2022 VALUES ('Wyoming', 'WY', 'West', 'Mountain', 581381);

CREATE TABLE income_2019 (
  state TEXT NOT NULL,
  state_code TEXT NOT NULL,
  region TEXT,
  median_household_income INTEGER
);
INSERT INTO income_2019 VALUES ('Alabama', 'AL', 'South', 51734);
INSERT INTO income_2019 VALUES ('Alaska', 'AK', 'West', 75463);
INSERT INTO income_2019 VALUES ('Arizona', 'AZ', 'West', 62055);
INSERT INTO income_2019 VALUES ('Arkansas', 'AR', 'South', 48952);
INSERT INTO income_2019 VALUES ('California', 'CA', 'West', 80440);
INSERT INTO income_2019 VALUES ('Colorado', 'CO', 'West', 77127);
INSERT INTO income_2019 VALUES ('Connecticut', 'CT', 'Northeast', 78833);
INSERT INTO income_2019 VALUES ('Delaware', 'DE', 'South', 70176);
INSERT INTO income_2019 VALUES ('District of Columbia', 'DC', 'South', 92266);
INSERT INTO income_2019 VALUES ('Florida', 'FL', 'South', 59227);
INSERT INTO income_2019 VALUES ('Georgia', 'GA', 'South', 61980);
INSERT INTO income_2019 VALUES ('Hawaii', 'HI', 'West', 83102);
INSERT INTO income_2019 VALUES ('Idaho', 'ID', 'West', 60999);
INSERT INTO income_2019 VALUES ('Illinois', 'IL', 'Midwest', 69187);
INSERT INTO income_2019 VALUES ('Indiana', 'IN', 'Midwest', 57603);
INSERT INTO income_2019 VALUES ('Iowa', 'IA', 'Midwest', 61691);
INSERT INTO income_2019 VALUES ('Kansas', 'KS', 'Midwest', 62087);
INSERT INTO income_2019 VALUES ('Kentucky', 'KY', 'South', 52295);
INSERT INTO income_2019 VALUES ('Louisiana', 'LA', 'South', 51073);
INSERT INTO income_2019 VALUES ('Maine', 'ME', 'Northeast', 58924);
INSERT INTO income_2019 VALUES ('Maryland', 'MD', 'South', 86738);
INSERT INTO income_2019 VALUES ('Massachusetts', 'MA', 'Northeast', 85843);
INSERT INTO income_2019 VALUES ('Michigan', 'MI', 'Midwest', 59584);
INSERT INTO income_2019 VALUES ('Minnesota', 'MN', 'Midwest', 74593);
INSERT INTO income_2019 VALUES ('Mississippi', 'MS', 'South', 45792);
INSERT INTO income_2019 VALUES ('Missouri', 'MO', 'Midwest', 57409);
INSERT INTO income_2019 VALUES ('Montana', 'MT', 'West', 57153);
INSERT INTO income_2019 VALUES ('Nebraska', 'NE', 'Midwest', 63229);
INSERT INTO income_2019 VALUES ('Nevada', 'NV', 'West', 63276);
INSERT INTO income_2019 VALUES ('New Hampshire', 'NH', 'Northeast', 77933);
INSERT INTO income_2019 VALUES ('New Jersey', 'NJ', 'Northeast', 85751);
INSERT INTO income_2019 VALUES ('New Mexico', 'NM', 'West', 51945);
INSERT INTO income_2019 VALUES ('New York', 'NY', 'Northeast', 72108);
INSERT INTO income_2019 VALUES ('North Carolina', 'NC', 'South', 57341);
INSERT INTO income_2019 VALUES ('North Dakota', 'ND', 'Midwest', 64577);
INSERT INTO income_2019 VALUES ('Ohio', 'OH', 'Midwest', 58642);
INSERT INTO income_2019 VALUES ('Oklahoma', 'OK', 'South', 54449);
INSERT INTO income_2019 VALUES ('Oregon', 'OR', 'West', 67058);
INSERT INTO income_2019 VALUES ('Pennsylvania', 'PA', 'Northeast', 63463);
INSERT INTO income_2019 VALUES ('Rhode Island', 'RI', 'Northeast', 71169);
INSERT INTO income_2019 VALUES ('South Carolina', 'SC', 'South', 56227);
INSERT INTO income_2019 VALUES ('South Dakota', 'SD', 'Midwest', 59533);
INSERT INTO income_2019 VALUES ('Tennessee', 'TN', 'South', 56071);
INSERT INTO income_2019 VALUES ('Texas', 'TX', 'South', 64034);
INSERT INTO income_2019 VALUES ('Utah', 'UT', 'West', 75780);
INSERT INTO income_2019 VALUES ('Vermont', 'VT', 'Northeast', 63001);
INSERT INTO income_2019 VALUES ('Virginia', 'VA', 'South', 76456);
INSERT INTO income_2019 VALUES ('Washington', 'WA', 'West', 78687);
INSERT INTO income_2019 VALUES ('West Virginia', 'WV', 'South', 48850);
INSERT INTO income_2019 VALUES ('Wisconsin', 'WI', 'Midwest', 64168);
INSERT INTO income_2019 VALUES ('Wyoming', 'WY', 'West', 65003);

CREATE TABLE income_2021 (
  state TEXT NOT NULL,
  state_code TEXT NOT NULL,
  region TEXT,
  median_household_income INTEGER
);
INSERT INTO income_2021 VALUES ('Alabama', 'AL', 'South', 53913);
INSERT INTO income_2021 VALUES ('Alaska', 'AK', 'West', 77845);
INSERT INTO income_2021 VALUES ('Arizona', 'AZ', 'West', 69056);
INSERT INTO income_2021 VALUES ('Arkansas', 'AR', 'South', 52528);
INSERT INTO income_2021 VALUES ('California', 'CA', 'West', 84907);
INSERT INTO income_2021 VALUES ('Colorado', 'CO', 'West', 82254);
INSERT INTO income_2021 VALUES ('Connecticut', 'CT', 'Northeast', 83771);
INSERT INTO income_2021 VALUES ('Delaware', 'DE', 'South', 71091);
INSERT INTO income_2021 VALUES ('District of Columbia', 'DC', 'South', 90088);
INSERT INTO income_2021 VALUES ('Florida', 'FL', 'South', 63062);
INSERT INTO income_2021 VALUES ('Georgia', 'GA', 'South', 66559);
INSERT INTO income_2021 VALUES ('Hawaii', 'HI', 'West', 84857);
INSERT INTO income_2021 VALUES ('Idaho', 'ID', 'West', 66474);
INSERT INTO income_2021 VALUES ('Illinois', 'IL', 'Midwest', 72205);
INSERT INTO income_2021 VALUES ('Indiana', 'IN', 'Midwest', 62743);
INSERT INTO income_2021 VALUES ('Iowa', 'IA', 'Midwest', 65429);
INSERT INTO income_2021 VALUES ('Kansas', 'KS', 'Midwest', 64124);
INSERT INTO income_2021 VALUES ('Kentucky', 'KY', 'South', 55573);
INSERT INTO income_2021 VALUES ('Louisiana', 'LA', 'South', 52087);
INSERT INTO income_2021 VALUES ('Maine', 'ME', 'Northeast', 64767);
INSERT INTO income_2021 VALUES ('Maryland', 'MD', 'South', 90203);
INSERT INTO income_2021 VALUES ('Massachusetts', 'MA', 'Northeast', 89645);
INSERT INTO income_2021 VALUES ('Michigan', 'MI', 'Midwest', 63202);
INSERT INTO income_2021 VALUES ('Minnesota', 'MN', 'Midwest', 77720);
INSERT INTO income_2021 VALUES ('Mississippi', 'MS', 'South', 48716);
INSERT INTO income_2021 VALUES ('Missouri', 'MO', 'Midwest', 61043);
INSERT INTO income_2021 VALUES ('Montana', 'MT', 'West', 63249);
INSERT INTO income_2021 VALUES ('Nebraska', 'NE', 'Midwest', 66817);
INSERT INTO income_2021 VALUES ('Nevada', 'NV', 'West', 66274);
INSERT INTO income_2021 VALUES ('New Hampshire', 'NH', 'Northeast', 88465);
INSERT INTO income_2021 VALUES ('New Jersey', 'NJ', 'Northeast', 89296);
INSERT INTO income_2021 VALUES ('New Mexico', 'NM', 'West', 53992);
INSERT INTO income_2021 VALUES ('New York', 'NY', 'Northeast', 74314);
INSERT INTO income_2021 VALUES ('North Carolina', 'NC', 'South', 61972);
INSERT INTO income_2021 VALUES ('North Dakota', 'ND', 'Midwest', 66519);
INSERT INTO income_2021 VALUES ('Ohio', 'OH', 'Midwest', 62262);
INSERT INTO income_2021 VALUES ('Oklahoma', 'OK', 'South', 55826);
INSERT INTO income_2021 VALUES ('Oregon', 'OR', 'West', 71562);
INSERT INTO income_2021 VALUES ('Pennsylvania', 'PA', 'Northeast', 68957);
INSERT INTO income_2021 VALUES ('Rhode Island', 'RI', 'Northeast', 74008);
INSERT INTO income_2021 VALUES ('South Carolina', 'SC', 'South', 59318);
INSERT INTO income_2021 VALUES ('South Dakota', 'SD', 'Midwest', 66143);
INSERT INTO income_2021 VALUES ('Tennessee', 'TN', 'South', 59695);
INSERT INTO income_2021 VALUES ('Texas', 'TX', 'South', 66963);
INSERT INTO income_2021 VALUES ('Utah', 'UT', 'West', 79449);
INSERT INTO income_2021 VALUES ('Vermont', 'VT', 'Northeast', 72431);
INSERT INTO income_2021 VALUES ('Virginia', 'VA', 'South', 80963);
INSERT INTO income_2021 VALUES ('Washington', 'WA', 'West', 84247);
INSERT INTO income_2021 VALUES ('West Virginia', 'WV', 'South', 51248);
INSERT INTO income_2021 VALUES ('Wisconsin', 'WI', 'Midwest', 67125);
INSERT INTO income_2021 VALUES ('Wyoming', 'WY', 'West', 65204);
