-- One PostgreSQL for the tailtune metadata DB (POSTGRES_DB), the Optuna studies and the MLflow backend store.
CREATE DATABASE optuna OWNER tailtune;
CREATE DATABASE mlflow OWNER tailtune;
