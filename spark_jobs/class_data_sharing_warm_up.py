"""The warm-up application whose loaded classes become the driver's class-data-sharing archive (include/spark/jvm.py); in
spark_jobs/ because a script's folder is first on sys.path, and include/spark/profile.py would shadow `profile`.

It does, on a few rows, what the project's jobs do: an Iceberg table created, appended, merged into, read through a
branch and its metadata tables; parquet written and read; a grouped aggregate; the OpenLineage listener watching it.
It uses a Hadoop catalog in the scratch folder given as its argument, so it needs no catalog server and leaves no
table or lineage event anywhere else. ``python -m`` is not how it runs: ``spark-submit`` runs this file.
"""

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

if __name__ == "__main__":
    scratch = sys.argv[1]
    spark = (
        SparkSession.builder.appName("class_data_sharing_warm_up")
        .config("spark.sql.catalog.warm_up", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.warm_up.type", "hadoop")
        .config("spark.sql.catalog.warm_up.warehouse", f"{scratch}/warehouse")
        .config("spark.sql.defaultCatalog", "warm_up")
        .getOrCreate()
    )
    rows = spark.range(1000).select(
        F.col("id"), (F.col("id") % 7).alias("zone"), F.current_timestamp().alias("at"), F.rand(1).alias("fare")
    )
    rows.write.mode("overwrite").parquet(f"{scratch}/rows.parquet")
    rows = spark.read.parquet(f"{scratch}/rows.parquet")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS warm_up.db")
    rows.writeTo("warm_up.db.trips").using("iceberg").partitionedBy(F.days("at")).createOrReplace()
    rows.where("id < 10").writeTo("warm_up.db.trips").append()
    rows.createOrReplaceTempView("updates")
    spark.sql("ALTER TABLE warm_up.db.trips CREATE BRANCH audit")
    spark.sql(
        "MERGE INTO warm_up.db.trips.branch_audit t USING updates u ON t.id = u.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    # runs as it is analysed, nothing read, as in wap.publish
    spark.sql("CALL warm_up.system.fast_forward('db.trips', 'main', 'audit')")
    spark.table("warm_up.db.trips").groupBy("zone").agg(F.count("*"), F.avg("fare")).collect()
    spark.sql("SELECT * FROM warm_up.db.trips.snapshots").collect()
    spark.sql("SELECT * FROM warm_up.db.trips.files").collect()
    spark.stop()
