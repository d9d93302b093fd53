from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ('canary', '0007_verbose_names'),
    ]

    operations = [
        migrations.AddField(
            model_name="turnevent",
            name="follow_up_language",
            field=models.CharField(blank=True, max_length=10, null=True),
        ),
        migrations.AddField(
            model_name="turnevent",
            name="follow_up_detector",
            field=models.CharField(blank=True, default="", max_length=40),
            preserve_default=False,
        ),
    ]
