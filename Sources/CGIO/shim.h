/* GIO: g_app_info_launch_default_for_uri (default URI handler, then the OpenURI portal). */
#include <gio/gio.h>
