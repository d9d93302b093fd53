from django.db import migrations, models


def mark_demo_experiments(apps, schema_editor):
    """Experiments the demo's installer created (audited as the system part `demo`) are the demo's."""
    Experiment = apps.get_model("canary", "Experiment")
    AuditLog = apps.get_model("evalhub", "AuditLog")
    made = AuditLog.objects.filter(
        target_type="canary.experiment", action="experiment.create", actor_name="demo"
    ).values_list("target_id", flat=True)
    Experiment.objects.filter(pk__in=[int(pk) for pk in made]).update(is_demo=True)


class Migration(migrations.Migration):
    dependencies = [
        ('canary', '0008_turnevent_follow_up_language'),
        ("evalhub", "0011_modelversion_api_key_encrypted"),
    ]

    operations = [
        migrations.AddField(
            model_name="experiment",
            name="is_demo",
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(mark_demo_experiments, migrations.RunPython.noop),
    ]
