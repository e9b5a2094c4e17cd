# Airflow 3 image of the project: Java 17 for spark-submit, the pinned Python set, the checksummed jars.
FROM apache/airflow:3.3.2-python3.11
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless make \
 && rm -rf /var/lib/apt/lists/*
USER airflow
COPY --chown=airflow:root requirements.txt constraints.txt pyproject.toml /opt/project/
COPY --chown=airflow:root include/ /opt/project/include/
COPY --chown=airflow:root spark_jobs/ /opt/project/spark_jobs/
COPY --chown=airflow:root jars/jars.lock.json /opt/project/jars/jars.lock.json
RUN pip install --no-cache-dir -r /opt/project/requirements.txt -c /opt/project/constraints.txt \
 && pip install --no-cache-dir --no-deps -e /opt/project --config-settings editable_mode=compat \
 && python -m include.jars --jars-dir /opt/project/jars
ENV PYTHONPATH=/opt/project
