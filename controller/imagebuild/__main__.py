import sys

from controller.imagebuild.build import main

sys.exit(main())
