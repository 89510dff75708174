"""The landing page: behind login, scoped to the user's tenants."""

from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from scheduler.models import Tenant


def test_tenant_users_see_only_their_tenants(client: Client, tenant: Tenant, other_tenant: Tenant) -> None:
    user = User.objects.create_user("bob", password="pw-bob-12345")
    tenant.members.add(user)
    client.force_login(user)
    page = client.get("/").content.decode()
    assert "vision" in page and "language" not in page


def test_staff_see_every_tenant(operator_client: Client, tenant: Tenant, other_tenant: Tenant) -> None:
    page = operator_client.get("/").content.decode()
    assert "vision" in page and "language" in page


def test_login_page_is_public_and_has_csrf(client: Client, db: None) -> None:
    response = client.get("/accounts/login/")
    assert response.status_code == 200 and "csrfmiddlewaretoken" in response.content.decode()


def test_logging_in_with_the_form(db: None) -> None:
    User.objects.create_user("carol", password="pw-carol-123")
    client = Client(enforce_csrf_checks=True)
    token = client.get("/accounts/login/").cookies[settings.CSRF_COOKIE_NAME].value
    response = client.post("/accounts/login/", {"username": "carol", "password": "pw-carol-123",
                                                "csrfmiddlewaretoken": token})
    assert response.status_code == 302 and response["Location"] == "/"
    assert Client(enforce_csrf_checks=True).post("/accounts/login/", {"username": "carol"}).status_code == 403


def test_visibility_rule_for_jobs(tenant: Tenant, other_tenant: Tenant, job) -> None:  # type: ignore[no-untyped-def]
    from django.contrib.auth.models import AnonymousUser

    from scheduler.models import Job

    member, outsider = User.objects.create_user("m"), User.objects.create_user("o")
    tenant.members.add(member)
    other_tenant.members.add(outsider)
    assert list(Job.objects.visible_to(member)) == [job]
    assert list(Job.objects.visible_to(outsider)) == []
    assert list(Job.objects.visible_to(AnonymousUser())) == []
    assert list(Job.objects.visible_to(User(is_staff=True))) == [job]
