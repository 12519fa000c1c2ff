/* GIO: g_app_info_launch_default_for_uri (default URI handler, then the OpenURI portal); GDBus
   for the desktop session's lock (TokenStore's SessionLockSource). */
#include <gio/gio.h>
