'''python3-dbusmock template: org.freedesktop.ScreenSaver (the freedesktop screensaver name that
KDE, Xfce and others own), for TokenStore's session-lock tests on a private session bus.

GetActive answers the state; SetActive(b) changes it and emits ActiveChanged(b), as a screen
locker does when it locks or unlocks the screen. Start it with
`python3 -m dbusmock --template Tests/DBusMock/freedesktop_screensaver.py` (session bus).
'''

BUS_NAME = 'org.freedesktop.ScreenSaver'
MAIN_OBJ = '/org/freedesktop/ScreenSaver'
MAIN_IFACE = 'org.freedesktop.ScreenSaver'
SYSTEM_BUS = False


def load(mock, parameters):
    mock.AddMethods(MAIN_IFACE, [
        ('GetActive', '', 'b', 'ret = self.is_active'),
        ('SetActive', 'b', 'b', 'self.is_active = args[0]; self.EmitSignal('
                                '"", "ActiveChanged", "b", [self.is_active]); ret = True'),
    ])
    mock.is_active = bool(parameters.get('active', False))
