"""The reports' rows, taken over from the project's app (``cluster_ops``) with their tables as they are: only Django's
state changes, and the rows' content types (so every permission held on reports is still held)."""

import cluster_ops.reports.models
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def move_content_types(apps, schema_editor):
    content_types = apps.get_model("contenttypes", "ContentType")
    content_types.objects.filter(app_label="cluster_ops", model__in=["report", "reportrecipient", "reportdelivery"]
                                 ).update(app_label="reports")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('scheduler', '0024_executor_any_registered_backend'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ('cluster_ops', '0007_report_send_permission'),
        ('contenttypes', '0002_remove_content_type_name'),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=[
        migrations.CreateModel(
            name='Report',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('daily', 'daily'), ('weekly', 'weekly'), ('custom', 'custom')], max_length=10)),
                ('period_start', models.DateTimeField()),
                ('period_end', models.DateTimeField(help_text='exclusive: the midnight after the last day')),
                ('status', models.CharField(choices=[('queued', 'queued'), ('running', 'being made'), ('ready', 'ready'), ('failed', 'failed')], default='queued', max_length=10)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('made_at', models.DateTimeField(blank=True, help_text='when its files were last written', null=True)),
                ('sent_at', models.DateTimeField(blank=True, help_text='last sent to the workers; resent if still queued', null=True)),
                ('started_at', models.DateTimeField(blank=True, help_text='when a worker began making it', null=True)),
                ('heartbeat_at', models.DateTimeField(blank=True, help_text='last sign of life of the worker making it', null=True)),
                ('attempts', models.PositiveIntegerField(default=0, help_text='workers that began making it (made again)')),
                ('html', models.FileField(blank=True, upload_to=cluster_ops.reports.models.report_file_path)),
                ('pdf', models.FileField(blank=True, upload_to=cluster_ops.reports.models.report_file_path)),
                ('csv', models.FileField(blank=True, upload_to=cluster_ops.reports.models.report_file_path)),
                ('accounting', models.FileField(blank=True, help_text="exact GPU-hours per tenant and user (CSV, as sreport's accounts)", upload_to=cluster_ops.reports.models.report_file_path)),
                ('summary', models.JSONField(blank=True, default=dict, help_text='headline figures for the list and the e-mail')),
                ('notes', models.JSONField(blank=True, default=list, help_text='what a section could not show, and why')),
                ('error', models.TextField(blank=True)),
                ('requested_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('tenant', models.ForeignKey(blank=True, help_text='empty: the whole cluster', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='reports', to='scheduler.tenant')),
            ],
            options={
                'db_table': 'cluster_ops_report',
                'ordering': ['-period_start', 'kind', 'tenant__name', '-id'],
                'permissions': [('send_report', 'Can e-mail reports to their recipients')],
            },
        ),
        migrations.CreateModel(
            name='ReportRecipient',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('email', models.EmailField(max_length=254)),
                ('daily', models.BooleanField(default=True, help_text='receives the daily reports')),
                ('weekly', models.BooleanField(default=True, help_text='receives the weekly reports')),
                ('active', models.BooleanField(default=True)),
                ('tenant', models.ForeignKey(blank=True, help_text='empty: the cluster-wide reports', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='report_recipients', to='scheduler.tenant')),
            ],
            options={
                'db_table': 'cluster_ops_reportrecipient',
                'ordering': ['tenant__name', 'email'],
            },
        ),
        migrations.CreateModel(
            name='ReportDelivery',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('email', models.EmailField(help_text='the address it went to', max_length=254)),
                ('status', models.CharField(choices=[('pending', 'pending'), ('sending', 'sending'), ('retrying', 'failed, will retry'), ('sent', 'sent'), ('failed', 'failed')], default='pending', max_length=10)),
                ('attempts', models.PositiveIntegerField(default=0)),
                ('last_error', models.TextField(blank=True)),
                ('queued_at', models.DateTimeField()),
                ('sent_at', models.DateTimeField(blank=True, null=True)),
                ('report', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='reports.report')),
                ('recipient', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='reports.reportrecipient')),
            ],
            options={
                'verbose_name_plural': 'report deliveries',
                'db_table': 'cluster_ops_reportdelivery',
                'ordering': ['-queued_at', '-id'],
            },
        ),
        migrations.AddConstraint(
            model_name='report',
            constraint=models.UniqueConstraint(condition=models.Q(('tenant__isnull', False)), fields=('kind', 'period_start', 'period_end', 'tenant'), name='report_one_per_period_and_tenant'),
        ),
        migrations.AddConstraint(
            model_name='report',
            constraint=models.UniqueConstraint(condition=models.Q(('tenant__isnull', True)), fields=('kind', 'period_start', 'period_end'), name='report_one_per_period_cluster_wide'),
        ),
        migrations.AddConstraint(
            model_name='report',
            constraint=models.CheckConstraint(condition=models.Q(('period_end__gt', models.F('period_start'))), name='report_period_not_empty'),
        ),
        migrations.AddConstraint(
            model_name='report',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['daily', 'weekly', 'custom'])), name='report_kind_valid'),
        ),
        migrations.AddConstraint(
            model_name='report',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['queued', 'running', 'ready', 'failed'])), name='report_status_valid'),
        ),
        migrations.AddConstraint(
            model_name='reportrecipient',
            constraint=models.UniqueConstraint(condition=models.Q(('tenant__isnull', False)), fields=('tenant', 'email'), name='recipient_unique_per_tenant'),
        ),
        migrations.AddConstraint(
            model_name='reportrecipient',
            constraint=models.UniqueConstraint(condition=models.Q(('tenant__isnull', True)), fields=('email',), name='recipient_unique_cluster_wide'),
        ),
        migrations.AddConstraint(
            model_name='reportdelivery',
            constraint=models.UniqueConstraint(fields=('report', 'recipient'), name='delivery_one_per_report_and_recipient'),
        ),
        migrations.AddConstraint(
            model_name='reportdelivery',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['pending', 'sending', 'retrying', 'sent', 'failed'])), name='delivery_status_valid'),
        ),
    ]), migrations.RunPython(move_content_types, migrations.RunPython.noop)]
