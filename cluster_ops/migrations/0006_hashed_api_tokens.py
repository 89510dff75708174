"""API tokens move to hashed storage: each DRF token (kept in clear in ``authtoken_token``) becomes a knox token with
its digest, so clients keep working, and the clear-text table is dropped."""

from django.db import migrations


def hash_old_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if "authtoken_token" not in connection.introspection.table_names():
        return
    from knox.crypto import hash_token
    from knox.settings import CONSTANTS

    AuthToken = apps.get_model("knox", "AuthToken")
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, user_id, created FROM authtoken_token")
        rows = cursor.fetchall()
    for key, user_id, created in rows:
        AuthToken.objects.create(digest=hash_token(key), token_key=key[: CONSTANTS.TOKEN_KEY_LENGTH],
                                 user_id=user_id, expiry=None, created=created)
    schema_editor.execute("DROP TABLE authtoken_token")


class Migration(migrations.Migration):
    dependencies = [("cluster_ops", "0005_report_heartbeat"), ("knox", "0009_extend_authtoken_field")]
    operations = [migrations.RunPython(hash_old_tokens, migrations.RunPython.noop)]
