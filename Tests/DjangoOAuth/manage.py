#!/usr/bin/env python3
"""Django's manage.py for the DOT test project (DOT_STATE_DIR and DOT_PORT must be set;
serve.py sets them up and is what the tests run)."""
import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
