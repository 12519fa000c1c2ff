# Imports the TokenStore binding and reads one item: python3 py_tokenstore_get.py STORE SERVICE ACCOUNT
import sys
import tokenstore

with tokenstore.Store("org.example.bench", path=sys.argv[1]) as store:
    secret = store.get(sys.argv[3], tokenstore.Kind.GENERIC, service=sys.argv[2])
    print(len(secret))
