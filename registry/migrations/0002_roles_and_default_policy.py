from django.db import migrations

ROLES = ("viewer", "ci", "release_manager")


def create(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    GatePolicy = apps.get_model("evalhub", "GatePolicy")
    for role in ROLES:
        Group.objects.get_or_create(name=role)
    GatePolicy.objects.get_or_create(name="default", defaults={"description": "Built-in defaults."})


def remove(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=ROLES).delete()


class Migration(migrations.Migration):
    dependencies = [("evalhub", "0001_initial"), ("auth", "0012_alter_user_first_name_max_length")]
    operations = [migrations.RunPython(create, remove)]
