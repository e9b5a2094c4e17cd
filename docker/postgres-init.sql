CREATE USER airflow WITH PASSWORD 'airflow';
CREATE DATABASE airflow OWNER airflow;
CREATE USER iceberg WITH PASSWORD 'iceberg';
CREATE DATABASE iceberg OWNER iceberg;
CREATE USER marquez WITH PASSWORD 'marquez';
CREATE DATABASE marquez OWNER marquez;
CREATE USER lineage WITH PASSWORD 'lineage';
CREATE DATABASE lineage OWNER lineage;
