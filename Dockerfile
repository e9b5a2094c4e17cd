# The project's one image, for every service of docker-compose.yml that runs the project's code:
# - Airflow 3.3.2 (api-server, scheduler, dag-processor, triggerer), the versions apache-airflow is pinned to;
# - Spark 4.1.3 from the pinned pyspark (pyspark-client pinned to the same version: docs/versions-and-traps.md, Trap 1; its spark-class
#   runs the standalone master and workers, its spark-submit the jobs), so the driver, the executors and the cluster
#   share one Spark, one Python (3.11) and one set of packages;
# - Java 17 (a JDK: set-up compiles the REST catalog launcher), the checksummed jars, the compiled launcher.
# The project's code reaches the executors in the zip spark-submit ships (include/spark/codeship.py), like on any cluster.
FROM apache/airflow:3.3.2-python3.11
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jdk-headless \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /opt/project/var /opt/project/jars \
 && chown -R airflow:root /opt/project
USER airflow
WORKDIR /opt/project
ENV PYTHONPATH=/opt/project \
    PIPELINE_VAR_DIR=/opt/project/var
COPY --chown=airflow:root requirements.txt constraints.txt pyproject.toml ./
RUN pip install --no-cache-dir -r requirements.txt -c constraints.txt
COPY --chown=airflow:root jars/jars.lock.json jars/
COPY --chown=airflow:root include/ include/
RUN python -m include.core.jars --jars-dir /opt/project/jars \
 && python -m include.lineage.api.assets \
 && python -c "from include.services import catalog_server; catalog_server.launcher_jar()" \
 && ln -s "$(python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')" /opt/project/spark
ENV SPARK_HOME=/opt/project/spark
COPY --chown=airflow:root spark_jobs/ spark_jobs/
COPY --chown=airflow:root dags/ dags/
COPY --chown=airflow:root plugins/ plugins/
COPY --chown=airflow:root docker/ docker/
