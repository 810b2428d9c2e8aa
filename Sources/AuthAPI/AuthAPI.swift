// AuthAPI
