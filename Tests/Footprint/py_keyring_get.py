# Imports `keyring` (PyPI) and reads one item from the Secret Service: python3 py_keyring_get.py SERVICE ACCOUNT
import sys
import keyring

secret = keyring.get_password(sys.argv[1], sys.argv[2])
print(len(secret))
