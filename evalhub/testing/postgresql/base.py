"""PostgreSQL for the test suite: the database refuses a TRUNCATE of the audit log and the decisions
(registry 0010, gate 0004), and Django empties the tables between transactional tests with TRUNCATE.
The flush alone runs as a replica session, which fires no triggers; that needs a superuser, as the
tests' `postgres` role is. Everything else is the stock backend, triggers included."""

from django.db.backends.postgresql import base, operations


class DatabaseOperations(operations.DatabaseOperations):
    def execute_sql_flush(self, sql_list: list[str]) -> None:
        super().execute_sql_flush(["SET LOCAL session_replication_role = replica", *sql_list])


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
