"""The reports' rows now belong to the reports app (``cluster_ops.reports``): the same tables, so this app forgets them
without touching the database."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('cluster_ops', '0007_report_send_permission'),
        ('reports', '0001_initial'),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=[
        migrations.RemoveField(
            model_name='reportdelivery',
            name='report',
        ),
        migrations.RemoveField(
            model_name='reportdelivery',
            name='recipient',
        ),
        migrations.RemoveField(
            model_name='reportrecipient',
            name='tenant',
        ),
        migrations.DeleteModel(
            name='Report',
        ),
        migrations.DeleteModel(
            name='ReportDelivery',
        ),
        migrations.DeleteModel(
            name='ReportRecipient',
        ),
    ])]
