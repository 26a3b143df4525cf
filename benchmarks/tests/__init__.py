# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
