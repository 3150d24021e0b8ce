"""Queries from the seeds (../shared/seeds), shared by the SQL and the engine tests."""

# As written there (001 lines 101-111 and 462-466; 004 line 183 on, OCR noise removed).
SURGE_SQL = """SELECT city_id AS tag_city_id,
       S2Id(lat,long,13) AS tag_s2id,
       vehicle_type AS tag_vehicle_type,
       count(1) AS num_of_bookings,
       TUMBLE_END(rowtime,INTERVAL '60' SECOND) AS window_timestamp,
FROM `data_stream`
WHERE status='COMPLETED'
GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND),
       city_id,
       S2Id(lat, long, 13),
       vehicle_type
"""
SUPPLY_SQL = """SELECT DistinctCount(driver_id) as drivers , S2Id(latitude, longitude, 13) as
label_s2id, driver_status as label_driver_status, TUMBLE_END(rowtime,
INTERVAL '60' SECOND) AS window_timestamp from `supply_data` GROUP
BY TUMBLE ( rowtime, INTERVAL '60' SECOND ), S2Id(latitude, longitude, 13),
driver_status"""
SUPPLY_S2_SQL = """SELECT TUMBLE_START(rowtime, INTERVAL '1' MINUTE) AS window_start_time,
TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_end_time,
CAST(S2Id(driver_location.latitude, driver_location.longitude, 13) AS BIGINT) AS s2_id,
13 AS s2_id_level,
count(1) AS num_drivers
FROM `supply_data`
GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE),
CAST(S2Id(driver_location.latitude, driver_location.longitude, 13) AS BIGINT)"""
