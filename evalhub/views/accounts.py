"""EvalHub's own sign-in and sign-out for every role that reads the pages (viewer, ci,
release_manager); the admin's login stays for staff."""

from __future__ import annotations

from django import forms
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.utils.translation import gettext_lazy as _

from registry.roles import READ_ROLES, user_roles


class SignInForm(AuthenticationForm):
    """The password check, then the role: an account that may not read the pages (no role, or only
    the chat app's `app`) is told so here instead of meeting a 403 on every page."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "no_reading_role": _(
            "This account has no role that may read these pages (viewer, ci or release_manager). "
            "Ask an administrator to grant one."
        ),
    }

    def confirm_login_allowed(self, user) -> None:
        super().confirm_login_allowed(user)
        if not user_roles(user) & READ_ROLES:
            raise forms.ValidationError(self.error_messages["no_reading_role"], code="no_reading_role")


sign_in = auth_views.LoginView.as_view(
    template_name="registration/login.html", authentication_form=SignInForm, redirect_authenticated_user=True
)
# POST only (Django's rule): the page header's sign-out button is a form.
sign_out = auth_views.LogoutView.as_view()
