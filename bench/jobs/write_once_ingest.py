"""A design measured, not shipped: one TLC month loaded in one Spark application with its rows written once.

Today's ingest is two applications (``stage_taxi``, then ``merge_taxi``) and two copies of the month (the staging
table, then raw). The design this job measures has no staging copy: the file's good rows go straight to an audit
branch of raw (write-audit-publish's branch is the staging area), the quarantine beside them, then the checks and the
fast-forward, all in one application. It is built from the jobs' own functions, so it costs what they cost:

- ``stage_taxi.extract`` / ``transform`` / ``split_flagged``: the read, the normalisation, the row ids, the flags;
- ``merge_taxi.append_to_empty_month``: the append of a month into raw (here: its audit branch);
- the quarantine's write, as ``stage_taxi.load`` writes it;
- ``rows_and_distinct_ids`` on the branch's month: the uniqueness check, once;
- ``audit.raw_month_counts``: the audit's pass over the branch's month;
- ``wap.publish``: the fast-forward of main.

Left out, because the design would change them rather than run them as they are: the job reports (lineage facets),
the repeated-row removal (it runs only when a file repeats a row), and the loaded-source tags. Run by ``make bench``
beside the real jobs (``bench/pipeline.py``: ``ingest.write_once_ratio``) on an empty raw table: a first load.
Arguments: the landed file and its month.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from pyspark.sql import functions as F

from include.core import naming
from spark_jobs import merge_taxi, stage_taxi
from spark_jobs.common import audit, wap
from spark_jobs.common.session import spark_session
from spark_jobs.common.tables import current_snapshot_id, ensure_table, qualified, write_one_partition_per_job
from spark_jobs.common.taxi import rows_and_distinct_ids, split_flagged


def main(argv: list[str]) -> None:
    landed, month = argv
    spark = spark_session("bench_write_once_ingest")
    write_one_partition_per_job(spark)
    source, nanos = stage_taxi.extract(spark, landed)
    good, quarantined = split_flagged(stage_taxi.transform(source, landed, month, datetime.now(UTC), nanos))
    ensure_table(spark, naming.TAXI_QUARANTINE, quarantined.schema, partitioned_by="source_month")
    merge_taxi.ensure_raw(spark, good.schema)
    base = current_snapshot_id(spark, naming.TAXI_RAW)
    branch = wap.branch_name("taxi", month)
    wap.open_branch(spark, naming.TAXI_RAW, branch)
    merge_taxi.append_to_empty_month(good, month, base)
    quarantined.writeTo(qualified(naming.TAXI_QUARANTINE)).overwrite(F.col("source_month") == month)
    wap.refresh(spark, naming.TAXI_RAW)
    rows, ids = rows_and_distinct_ids(spark.table(qualified(naming.TAXI_RAW)).where(merge_taxi.month_filter(month)))
    counted = audit.raw_month_counts(spark, month)["rows"]
    # A measurement of a broken path would be worse than none: the branch must hold the month, each row once.
    if not rows or rows != ids or rows != counted:
        raise RuntimeError(f"write-once prototype: {rows} rows, {ids} distinct ids, {counted} audited in {month}")
    wap.publish(spark, naming.TAXI_RAW, branch)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
