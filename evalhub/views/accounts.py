"""EvalHub's own sign-in and sign-out for every role that has pages (viewer, ci, release_manager,
annotator); the admin's login stays for staff."""

from __future__ import annotations

from django import forms
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from registry.roles import READ_ROLES, REVIEW_ROLES, user_roles

# The roles that open pages: readers, and annotators (the review queue only).
PAGE_ROLES = READ_ROLES | REVIEW_ROLES


class SignInForm(AuthenticationForm):
    """The password check, then the role: an account that opens no page (no role, or only the chat
    app's `app`) is told so here instead of meeting a 403 on every page."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "no_reading_role": _(
            "This account has no role that may open these pages (viewer, ci, release_manager or "
            "annotator). Ask an administrator to grant one."
        ),
    }

    def confirm_login_allowed(self, user) -> None:
        super().confirm_login_allowed(user)
        if not user_roles(user) & PAGE_ROLES:
            raise forms.ValidationError(self.error_messages["no_reading_role"], code="no_reading_role")


class SignInView(auth_views.LoginView):
    template_name = "registration/login.html"
    authentication_form = SignInForm
    redirect_authenticated_user = True

    def get_success_url(self) -> str:
        url = super().get_success_url()
        review = reverse("review-list")
        # An annotator opens the review queue and nothing else: they land there, not on a 403.
        if not user_roles(self.request.user) & READ_ROLES and not url.startswith(review):
            return review
        return url


sign_in = SignInView.as_view()
# POST only (Django's rule): the page header's sign-out button is a form.
sign_out = auth_views.LogoutView.as_view()
