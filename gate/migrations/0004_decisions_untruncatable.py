from django.db import migrations

# PostgreSQL already refuses UPDATE and DELETE of a decision (a row trigger since evalhub 0005, which
# followed the table when it moved here); TRUNCATE, which row triggers do not see, is refused too.
NO_TRUNCATE_SQL = """
CREATE TRIGGER gate_decision_no_truncate BEFORE TRUNCATE ON gate_decision
    FOR EACH STATEMENT EXECUTE FUNCTION evalhub_refuse_change();
"""
TRUNCATE_SQL = "DROP TRIGGER IF EXISTS gate_decision_no_truncate ON gate_decision;"


def _postgres_only(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("gate", "0003_layer_name_from_registry"),
        ("evalhub", "0010_audit_rows_immutable_and_untruncatable"),
    ]

    operations = [migrations.RunPython(_postgres_only(NO_TRUNCATE_SQL), _postgres_only(TRUNCATE_SQL))]
