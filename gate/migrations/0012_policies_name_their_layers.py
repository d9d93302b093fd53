"""Every stored policy names the layers it requires. One that named none required every layer
installed; written down as the four there are, so a layer installed later is never required by it."""

from django.db import migrations

LAYERS = ["clean_accuracy", "robustness", "follow_up_rate", "business_value"]


def name_layers(apps, schema_editor):
    GatePolicy = apps.get_model("gate", "GatePolicy")
    for policy in GatePolicy.objects.all():
        if isinstance(policy.config, dict) and "required_layers" not in policy.config:
            policy.config = {**policy.config, "required_layers": LAYERS}
            policy.save(update_fields=["config"])


class Migration(migrations.Migration):
    dependencies = [("gate", "0011_gate_run_error_reason")]

    operations = [migrations.RunPython(name_layers, migrations.RunPython.noop)]
