"""The smallest Spark application: a session, one trivial query, stop. ``make bench``'s first_hour section submits it
with the project's Spark properties and bare, to price the fixed cost of one Spark task."""

from pyspark.sql import SparkSession

if __name__ == "__main__":
    spark = SparkSession.builder.appName("empty_job").getOrCreate()
    spark.sql("SELECT 1").collect()
    spark.stop()
