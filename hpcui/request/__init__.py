"""What a user asks for: the resource fields declared once, the validated request, and
its resolution against a site profile."""
