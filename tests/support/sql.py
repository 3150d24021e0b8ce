"""The SQL tests' tables (the seeds' booking and supply events as Spark schemas) and the UDFs they translate with."""

from __future__ import annotations

from pyspark.sql.types import ArrayType, DoubleType, IntegerType, StringType, StructField, StructType

LOCATION = StructType([StructField("latitude", DoubleType()), StructField("longitude", DoubleType())])
BOOKING = StructType(
    [
        StructField("order_number", StringType()),
        StructField("city_id", IntegerType()),
        StructField("lat", DoubleType()),
        StructField("long", DoubleType()),
        StructField("vehicle_type", StringType()),
        StructField("status", StringType()),
        StructField("amount", DoubleType()),
        StructField("tags", ArrayType(StringType())),
    ]
)
SUPPLY = StructType(
    [
        StructField("driver_id", StringType()),
        StructField("driver_status", StringType()),
        StructField("latitude", DoubleType()),
        StructField("longitude", DoubleType()),
        StructField("driver_location", LOCATION),
    ]
)
UDFS = ["S2Id", "S2AreaInKm2", "GeoHash", "Distance", "TimestampFromUnix", "FormatTimeInZone", "ElementAt", "Split"]
