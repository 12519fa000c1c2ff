/* tokenstore-gobject.h: libtokenstore-gobject, TokenStore as GObjects (GI namespace TokenStore-1). */
#pragma once

#include "ts-access-token.h"
#include "ts-account.h"
#include "ts-enums.h"
#include "ts-error.h"
#include "ts-session.h"
#include "ts-store.h"
