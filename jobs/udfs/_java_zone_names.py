"""Java's display names for time zones (pattern letters ``z``/``zzzz`` of SimpleDateFormat), Locale.US.

Generated once from OpenJDK 17 ``TimeZone.getDisplayName(daylight, SHORT|LONG, Locale.US)`` for every
``TimeZone.getAvailableIDs()`` (SystemV/* left out). tzdata's own abbreviations differ for ~240 zones ("+07" where
Java prints "ICT"), hence the table. Columns: id, short standard, short daylight, long standard, long daylight.
"""

from __future__ import annotations

from functools import cache

_TABLE = """\
Africa/Abidjan	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Africa/Accra	GMT	GHST	Greenwich Mean Time	Ghana Summer Time
Africa/Addis_Ababa	EAT	EAST	East Africa Time	Eastern African Summer Time
Africa/Algiers	CET	CEST	Central European Standard Time	Central European Summer Time
Africa/Asmara	EAT	EAST	East Africa Time	Eastern African Summer Time
Africa/Asmera	EAT	EAST	East Africa Time	Eastern African Summer Time
Africa/Bamako	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Africa/Bangui	WAT	WAST	West Africa Standard Time	West Africa Summer Time
Africa/Banjul	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Africa/Bissau	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Africa/Blantyre	CAT	CAST	Central Africa Time	Central African Summer Time
Africa/Brazzaville	WAT	WAST	West Africa Standard Time	West Africa Summer Time
Africa/Bujumbura	CAT	CAST	Central Africa Time	Central African Summer Time
Africa/Cairo	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Africa/Casablanca	WET	WEST	Western European Standard Time	Western European Summer Time
Africa/Ceuta	CET	CEST	Central European Standard Time	Central European Summer Time
Africa/Conakry	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Africa/Dakar	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Africa/Dar_es_Salaam	EAT	EAST	East Africa Time	Eastern African Summer Time
Africa/Djibouti	EAT	EAST	East Africa Time	Eastern African Summer Time
Africa/Douala	WAT	WAST	West Africa Standard Time	West Africa Summer Time
Africa/El_Aaiun	WET	WEST	Western European Standard Time	Western European Summer Time
Africa/Freetown	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Africa/Gaborone	CAT	CAST	Central Africa Time	Central African Summer Time
Africa/Harare	CAT	CAST	Central Africa Time	Central African Summer Time
Africa/Johannesburg	SAST	SAST	South Africa Standard Time	South Africa Summer Time
Africa/Juba	CAT	CAST	Central Africa Time	Central African Summer Time
Africa/Kampala	EAT	EAST	East Africa Time	Eastern African Summer Time
Africa/Khartoum	CAT	CAST	Central Africa Time	Central African Summer Time
Africa/Kigali	CAT	CAST	Central Africa Time	Central African Summer Time
Africa/Kinshasa	WAT	WAST	West Africa Standard Time	West Africa Summer Time
Africa/Lagos	WAT	WAST	West Africa Standard Time	West Africa Summer Time
Africa/Libreville	WAT	WAST	West Africa Standard Time	West Africa Summer Time
Africa/Lome	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Africa/Luanda	WAT	WAST	West Africa Standard Time	West Africa Summer Time
Africa/Lubumbashi	CAT	CAST	Central Africa Time	Central African Summer Time
Africa/Lusaka	CAT	CAST	Central Africa Time	Central African Summer Time
Africa/Malabo	WAT	WAST	West Africa Standard Time	West Africa Summer Time
Africa/Maputo	CAT	CAST	Central Africa Time	Central African Summer Time
Africa/Maseru	SAST	SAST	South Africa Standard Time	South Africa Summer Time
Africa/Mbabane	SAST	SAST	South Africa Standard Time	South Africa Summer Time
Africa/Mogadishu	EAT	EAST	East Africa Time	Eastern African Summer Time
Africa/Monrovia	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Africa/Nairobi	EAT	EAST	East Africa Time	Eastern African Summer Time
Africa/Ndjamena	WAT	WAST	West Africa Standard Time	West Africa Summer Time
Africa/Niamey	WAT	WAST	West Africa Standard Time	West Africa Summer Time
Africa/Nouakchott	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Africa/Ouagadougou	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Africa/Porto-Novo	WAT	WAST	West Africa Standard Time	West Africa Summer Time
Africa/Sao_Tome	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Africa/Timbuktu	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Africa/Tripoli	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Africa/Tunis	CET	CEST	Central European Standard Time	Central European Summer Time
Africa/Windhoek	CAT	WAT	Central Africa Time	Western African Time
America/Adak	HAST	HADT	Hawaii-Aleutian Standard Time	Hawaii-Aleutian Daylight Time
America/Anchorage	AKST	AKDT	Alaska Standard Time	Alaska Daylight Time
America/Anguilla	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Antigua	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Araguaina	BRT	BRST	Brasilia Standard Time	Brasilia Summer Time
America/Argentina/Buenos_Aires	ART	ARST	Argentina Standard Time	Argentina Summer Time
America/Argentina/Catamarca	ART	ARST	Argentina Standard Time	Argentina Summer Time
America/Argentina/ComodRivadavia	ART	ARST	Argentina Standard Time	Argentina Summer Time
America/Argentina/Cordoba	ART	ARST	Argentina Standard Time	Argentina Summer Time
America/Argentina/Jujuy	ART	ARST	Argentina Standard Time	Argentina Summer Time
America/Argentina/La_Rioja	ART	ARST	Argentina Standard Time	Argentina Summer Time
America/Argentina/Mendoza	ART	ARST	Argentina Standard Time	Argentina Summer Time
America/Argentina/Rio_Gallegos	ART	ARST	Argentina Standard Time	Argentina Summer Time
America/Argentina/Salta	ART	ARST	Argentina Standard Time	Argentina Summer Time
America/Argentina/San_Juan	ART	ARST	Argentina Standard Time	Argentina Summer Time
America/Argentina/San_Luis	ART	ARST	Argentina Standard Time	Argentina Summer Time
America/Argentina/Tucuman	ART	ARST	Argentina Standard Time	Argentina Summer Time
America/Argentina/Ushuaia	ART	ARST	Argentina Standard Time	Argentina Summer Time
America/Aruba	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Asuncion	PYT	PYST	Paraguay Standard Time	Paraguay Summer Time
America/Atikokan	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Atka	HAST	HADT	Hawaii-Aleutian Standard Time	Hawaii-Aleutian Daylight Time
America/Bahia	BRT	BRST	Brasilia Standard Time	Brasilia Summer Time
America/Bahia_Banderas	CST	CDT	Central Standard Time	Central Daylight Time
America/Barbados	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Belem	BRT	BRST	Brasilia Standard Time	Brasilia Summer Time
America/Belize	CST	CDT	Central Standard Time	Central Daylight Time
America/Blanc-Sablon	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Boa_Vista	AMT	AMST	Amazon Standard Time	Amazon Summer Time
America/Bogota	COT	COST	Colombia Standard Time	Colombia Summer Time
America/Boise	MST	MDT	Mountain Standard Time	Mountain Daylight Time
America/Buenos_Aires	ART	ARST	Argentina Standard Time	Argentina Summer Time
America/Cambridge_Bay	MST	MDT	Mountain Standard Time	Mountain Daylight Time
America/Campo_Grande	AMT	AMST	Amazon Standard Time	Amazon Summer Time
America/Cancun	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Caracas	VET	VEST	Venezuela Time	Venezuela Summer Time
America/Catamarca	ART	ARST	Argentina Standard Time	Argentina Summer Time
America/Cayenne	GFT	GFST	French Guiana Time	French Guiana Summer Time
America/Cayman	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Chicago	CST	CDT	Central Standard Time	Central Daylight Time
America/Chihuahua	CST	CDT	Central Standard Time	Central Daylight Time
America/Ciudad_Juarez	MST	MDT	Mountain Standard Time	Mountain Daylight Time
America/Coral_Harbour	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Cordoba	ART	ARST	Argentina Standard Time	Argentina Summer Time
America/Costa_Rica	CST	CDT	Central Standard Time	Central Daylight Time
America/Coyhaique	GMT-03:00	GMT-03:00	Coyhaique Standard Time	Coyhaique Daylight Time
America/Creston	MST	MDT	Mountain Standard Time	Mountain Daylight Time
America/Cuiaba	AMT	AMST	Amazon Standard Time	Amazon Summer Time
America/Curacao	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Danmarkshavn	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
America/Dawson	MST	MDT	Mountain Standard Time	Mountain Daylight Time
America/Dawson_Creek	MST	MDT	Mountain Standard Time	Mountain Daylight Time
America/Denver	MST	MDT	Mountain Standard Time	Mountain Daylight Time
America/Detroit	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Dominica	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Edmonton	MST	MDT	Mountain Standard Time	Mountain Daylight Time
America/Eirunepe	ACT	ACST	Acre Standard Time	Acre Summer Time
America/El_Salvador	CST	CDT	Central Standard Time	Central Daylight Time
America/Ensenada	PST	PDT	Pacific Standard Time	Pacific Daylight Time
America/Fort_Nelson	MST	MDT	Mountain Standard Time	Mountain Daylight Time
America/Fort_Wayne	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Fortaleza	BRT	BRST	Brasilia Standard Time	Brasilia Summer Time
America/Glace_Bay	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Godthab	WGT	WGST	West Greenland Standard Time	West Greenland Summer Time
America/Goose_Bay	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Grand_Turk	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Grenada	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Guadeloupe	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Guatemala	CST	CDT	Central Standard Time	Central Daylight Time
America/Guayaquil	ECT	ECST	Ecuador Time	Ecuador Summer Time
America/Guyana	GYT	GYST	Guyana Time	Guyana Summer Time
America/Halifax	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Havana	CST	CDT	Cuba Standard Time	Cuba Daylight Time
America/Hermosillo	MST	MDT	Mexican Pacific Standard Time	Mexican Pacific Daylight Time
America/Indiana/Indianapolis	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Indiana/Knox	CST	CDT	Central Standard Time	Central Daylight Time
America/Indiana/Marengo	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Indiana/Petersburg	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Indiana/Tell_City	CST	CDT	Central Standard Time	Central Daylight Time
America/Indiana/Vevay	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Indiana/Vincennes	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Indiana/Winamac	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Indianapolis	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Inuvik	MST	MDT	Mountain Standard Time	Mountain Daylight Time
America/Iqaluit	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Jamaica	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Jujuy	ART	ARST	Argentina Standard Time	Argentina Summer Time
America/Juneau	AKST	AKDT	Alaska Standard Time	Alaska Daylight Time
America/Kentucky/Louisville	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Kentucky/Monticello	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Knox_IN	CST	CDT	Central Standard Time	Central Daylight Time
America/Kralendijk	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/La_Paz	BOT	BOST	Bolivia Time	Bolivia Summer Time
America/Lima	PET	PEST	Peru Standard Time	Peru Summer Time
America/Los_Angeles	PST	PDT	Pacific Standard Time	Pacific Daylight Time
America/Louisville	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Lower_Princes	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Maceio	BRT	BRST	Brasilia Standard Time	Brasilia Summer Time
America/Managua	CST	CDT	Central Standard Time	Central Daylight Time
America/Manaus	AMT	AMST	Amazon Standard Time	Amazon Summer Time
America/Marigot	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Martinique	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Matamoros	CST	CDT	Central Standard Time	Central Daylight Time
America/Mazatlan	MST	MDT	Mexican Pacific Standard Time	Mexican Pacific Daylight Time
America/Mendoza	ART	ARST	Argentina Standard Time	Argentina Summer Time
America/Menominee	CST	CDT	Central Standard Time	Central Daylight Time
America/Merida	CST	CDT	Central Standard Time	Central Daylight Time
America/Metlakatla	AKST	AKDT	Alaska Standard Time	Alaska Daylight Time
America/Mexico_City	CST	CDT	Central Standard Time	Central Daylight Time
America/Miquelon	PMST	PMDT	St. Pierre & Miquelon Standard Time	St. Pierre & Miquelon Daylight Time
America/Moncton	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Monterrey	CST	CDT	Central Standard Time	Central Daylight Time
America/Montevideo	UYT	UYST	Uruguay Standard Time	Uruguay Summer Time
America/Montreal	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Montserrat	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Nassau	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/New_York	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Nipigon	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Nome	AKST	AKDT	Alaska Standard Time	Alaska Daylight Time
America/Noronha	FNT	FNST	Fernando de Noronha Standard Time	Fernando de Noronha Summer Time
America/North_Dakota/Beulah	CST	CDT	Central Standard Time	Central Daylight Time
America/North_Dakota/Center	CST	CDT	Central Standard Time	Central Daylight Time
America/North_Dakota/New_Salem	CST	CDT	Central Standard Time	Central Daylight Time
America/Nuuk	WGT	WGST	West Greenland Standard Time	West Greenland Summer Time
America/Ojinaga	CST	CDT	Central Standard Time	Central Daylight Time
America/Panama	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Pangnirtung	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Paramaribo	SRT	SRST	Suriname Time	Suriname Summer Time
America/Phoenix	MST	MDT	Mountain Standard Time	Mountain Daylight Time
America/Port-au-Prince	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Port_of_Spain	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Porto_Acre	ACT	ACST	Acre Standard Time	Acre Summer Time
America/Porto_Velho	AMT	AMST	Amazon Standard Time	Amazon Summer Time
America/Puerto_Rico	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Punta_Arenas	GMT-03:00	GMT-03:00	Punta Arenas Standard Time	Punta Arenas Standard Time
America/Rainy_River	CST	CDT	Central Standard Time	Central Daylight Time
America/Rankin_Inlet	CST	CDT	Central Standard Time	Central Daylight Time
America/Recife	BRT	BRST	Brasilia Standard Time	Brasilia Summer Time
America/Regina	CST	CDT	Central Standard Time	Central Daylight Time
America/Resolute	CST	CDT	Central Standard Time	Central Daylight Time
America/Rio_Branco	ACT	ACST	Acre Standard Time	Acre Summer Time
America/Rosario	ART	ARST	Argentina Standard Time	Argentina Summer Time
America/Santa_Isabel	PST	PDT	Northwest Mexico Standard Time	Northwest Mexico Daylight Time
America/Santarem	BRT	BRST	Brasilia Standard Time	Brasilia Summer Time
America/Santiago	CLT	CLST	Chile Standard Time	Chile Summer Time
America/Santo_Domingo	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Sao_Paulo	BRT	BRST	Brasilia Standard Time	Brasilia Summer Time
America/Scoresbysund	EGT	EGST	East Greenland Standard Time	East Greenland Summer Time
America/Shiprock	MST	MDT	Mountain Standard Time	Mountain Daylight Time
America/Sitka	AKST	AKDT	Alaska Standard Time	Alaska Daylight Time
America/St_Barthelemy	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/St_Johns	NST	NDT	Newfoundland Standard Time	Newfoundland Daylight Time
America/St_Kitts	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/St_Lucia	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/St_Thomas	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/St_Vincent	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Swift_Current	CST	CDT	Central Standard Time	Central Daylight Time
America/Tegucigalpa	CST	CDT	Central Standard Time	Central Daylight Time
America/Thule	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Thunder_Bay	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Tijuana	PST	PDT	Pacific Standard Time	Pacific Daylight Time
America/Toronto	EST	EDT	Eastern Standard Time	Eastern Daylight Time
America/Tortola	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Vancouver	PST	PDT	Pacific Standard Time	Pacific Daylight Time
America/Virgin	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
America/Whitehorse	MST	MDT	Mountain Standard Time	Mountain Daylight Time
America/Winnipeg	CST	CDT	Central Standard Time	Central Daylight Time
America/Yakutat	AKST	AKDT	Alaska Standard Time	Alaska Daylight Time
America/Yellowknife	MST	MDT	Mountain Standard Time	Mountain Daylight Time
Antarctica/Casey	AWST	AWDT	Casey Time	Australian Western Daylight Time
Antarctica/Davis	DAVT	DAVST	Davis Time	Davis Summer Time
Antarctica/DumontDUrville	DDUT	DDUST	Dumont-d\u2019Urville Time	Dumont-d'Urville Summer Time
Antarctica/Macquarie	AEST	AEDT	Australian Eastern Standard Time	Australian Eastern Daylight Time
Antarctica/Mawson	MAWT	MAWST	Mawson Time	Mawson Summer Time
Antarctica/McMurdo	NZST	NZDT	New Zealand Standard Time	New Zealand Daylight Time
Antarctica/Palmer	CLT	CLST	Chile Time	Chile Summer Time
Antarctica/Rothera	ROTT	ROTST	Rothera Time	Rothera Summer Time
Antarctica/South_Pole	NZST	NZDT	New Zealand Standard Time	New Zealand Daylight Time
Antarctica/Syowa	SYOT	SYOST	Syowa Time	Syowa Summer Time
Antarctica/Troll	GMT	CEST	Greenwich Mean Time	Central European Summer Time
Antarctica/Vostok	VOST	VOSST	Vostok Time	Vostok Summer Time
Arctic/Longyearbyen	CET	CEST	Central European Standard Time	Central European Summer Time
Asia/Aden	AST	ADT	Arabian Standard Time	Arabian Daylight Time
Asia/Almaty	ALMT	ALMST	East Kazakhstan Time	Alma-Ata Summer Time
Asia/Amman	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Asia/Anadyr	ANAT	ANAST	Anadyr Standard Time	Anadyr Summer Time
Asia/Aqtau	AQTT	AQTST	West Kazakhstan Time	Aqtau Summer Time
Asia/Aqtobe	AQTT	AQTST	West Kazakhstan Time	Aqtobe Summer Time
Asia/Ashgabat	TMT	TMST	Turkmenistan Standard Time	Turkmenistan Summer Time
Asia/Ashkhabad	TMT	TMST	Turkmenistan Standard Time	Turkmenistan Summer Time
Asia/Atyrau	GMT+05:00	GMT+05:00	West Kazakhstan Time	Atyrau Daylight Time
Asia/Baghdad	AST	ADT	Arabian Standard Time	Arabian Daylight Time
Asia/Bahrain	AST	ADT	Arabian Standard Time	Arabian Daylight Time
Asia/Baku	AZT	AZST	Azerbaijan Standard Time	Azerbaijan Summer Time
Asia/Bangkok	ICT	ICST	Indochina Time	Indochina Summer Time
Asia/Barnaul	GMT+07:00	GMT+07:00	Barnaul Standard Time	Barnaul Daylight Time
Asia/Beirut	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Asia/Bishkek	KGT	KGST	Kyrgyzstan Time	Kirgizstan Summer Time
Asia/Brunei	BNT	BNST	Brunei Darussalam Time	Brunei Summer Time
Asia/Calcutta	IST	IDT	India Standard Time	India Daylight Time
Asia/Chita	YAKT	YAKST	Yakutsk Standard Time	Yakutsk Summer Time
Asia/Choibalsan	CHOT	CHOST	Ulaanbaatar Standard Time	Ulaanbaatar Summer Time
Asia/Chongqing	CST	CDT	China Standard Time	China Daylight Time
Asia/Chungking	CST	CDT	China Standard Time	China Daylight Time
Asia/Colombo	IST	IDT	India Standard Time	India Daylight Time
Asia/Dacca	BDT	BDST	Bangladesh Standard Time	Bangladesh Summer Time
Asia/Damascus	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Asia/Dhaka	BDT	BDST	Bangladesh Standard Time	Bangladesh Summer Time
Asia/Dili	TLT	TLST	East Timor Time	Timor-Leste Summer Time
Asia/Dubai	GST	GDT	Gulf Standard Time	Gulf Daylight Time
Asia/Dushanbe	TJT	TJST	Tajikistan Time	Tajikistan Summer Time
Asia/Famagusta	EET	EEST	Eastern European Time	Eastern European Summer Time
Asia/Gaza	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Asia/Harbin	CST	CDT	China Standard Time	China Daylight Time
Asia/Hebron	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Asia/Ho_Chi_Minh	ICT	ICST	Indochina Time	Indochina Summer Time
Asia/Hong_Kong	HKT	HKST	Hong Kong Standard Time	Hong Kong Summer Time
Asia/Hovd	HOVT	HOVST	Hovd Standard Time	Hovd Summer Time
Asia/Irkutsk	IRKT	IRKST	Irkutsk Standard Time	Irkutsk Summer Time
Asia/Istanbul	TRT	TRST	Turkey Time	Turkey Summer Time
Asia/Jakarta	WIB	WIST	Western Indonesia Time	West Indonesia Summer Time
Asia/Jayapura	WIT	EIST	Eastern Indonesia Time	East Indonesia Summer Time
Asia/Jerusalem	IST	IDT	Israel Standard Time	Israel Daylight Time
Asia/Kabul	AFT	AFST	Afghanistan Time	Afghanistan Summer Time
Asia/Kamchatka	PETT	PETST	Petropavlovsk-Kamchatski Standard Time	Petropavlovsk-Kamchatski Summer Time
Asia/Karachi	PKT	PKST	Pakistan Standard Time	Pakistan Summer Time
Asia/Kashgar	XJT	XJDT	Xinjiang Standard Time	Xinjiang Daylight Time
Asia/Kathmandu	NPT	NPST	Nepal Time	Nepal Summer Time
Asia/Katmandu	NPT	NPST	Nepal Time	Nepal Summer Time
Asia/Khandyga	YAKT	YAKST	Yakutsk Standard Time	Yakutsk Summer Time
Asia/Kolkata	IST	IDT	India Standard Time	India Daylight Time
Asia/Krasnoyarsk	KRAT	KRAST	Krasnoyarsk Standard Time	Krasnoyarsk Summer Time
Asia/Kuala_Lumpur	MYT	MYST	Malaysia Time	Malaysia Summer Time
Asia/Kuching	MYT	MYST	Malaysia Time	Malaysia Summer Time
Asia/Kuwait	AST	ADT	Arabian Standard Time	Arabian Daylight Time
Asia/Macao	CST	CDT	China Standard Time	China Daylight Time
Asia/Macau	CST	CDT	China Standard Time	China Daylight Time
Asia/Magadan	MAGT	MAGST	Magadan Standard Time	Magadan Summer Time
Asia/Makassar	WITA	CIST	Central Indonesia Time	Central Indonesia Summer Time
Asia/Manila	PST	PDT	Philippine Standard Time	Philippine Summer Time
Asia/Muscat	GST	GDT	Gulf Standard Time	Gulf Daylight Time
Asia/Nicosia	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Asia/Novokuznetsk	KRAT	KRAST	Krasnoyarsk Standard Time	Krasnoyarsk Summer Time
Asia/Novosibirsk	NOVT	NOVST	Novosibirsk Standard Time	Novosibirsk Summer Time
Asia/Omsk	OMST	OMSST	Omsk Standard Time	Omsk Summer Time
Asia/Oral	ORAT	ORAST	West Kazakhstan Time	Oral Summer Time
Asia/Phnom_Penh	ICT	ICST	Indochina Time	Indochina Summer Time
Asia/Pontianak	WIB	WIST	Western Indonesia Time	West Indonesia Summer Time
Asia/Pyongyang	KST	KDT	Korean Standard Time	Korean Daylight Time
Asia/Qatar	AST	ADT	Arabian Standard Time	Arabian Daylight Time
Asia/Qostanay	QOST	QOSST	East Kazakhstan Time	Kostanay Summer Time
Asia/Qyzylorda	QYZT	QYZST	West Kazakhstan Time	Qyzylorda Summer Time
Asia/Rangoon	MMT	MMST	Myanmar Time	Myanmar Summer Time
Asia/Riyadh	AST	ADT	Arabian Standard Time	Arabian Daylight Time
Asia/Saigon	ICT	ICST	Indochina Time	Indochina Summer Time
Asia/Sakhalin	SAKT	SAKST	Sakhalin Standard Time	Sakhalin Summer Time
Asia/Samarkand	UZT	UZST	Uzbekistan Standard Time	Uzbekistan Summer Time
Asia/Seoul	KST	KDT	Korean Standard Time	Korean Daylight Time
Asia/Shanghai	CST	CDT	China Standard Time	China Daylight Time
Asia/Singapore	SGT	SGST	Singapore Standard Time	Singapore Summer Time
Asia/Srednekolymsk	SRET	SREDT	Srednekolymsk Time	Srednekolymsk Daylight Time
Asia/Taipei	CST	CDT	Taipei Standard Time	Taipei Daylight Time
Asia/Tashkent	UZT	UZST	Uzbekistan Standard Time	Uzbekistan Summer Time
Asia/Tbilisi	GET	GEST	Georgia Standard Time	Georgia Summer Time
Asia/Tehran	IRST	IRDT	Iran Standard Time	Iran Daylight Time
Asia/Tel_Aviv	IST	IDT	Israel Standard Time	Israel Daylight Time
Asia/Thimbu	BTT	BTST	Bhutan Time	Bhutan Summer Time
Asia/Thimphu	BTT	BTST	Bhutan Time	Bhutan Summer Time
Asia/Tokyo	JST	JDT	Japan Standard Time	Japan Daylight Time
Asia/Tomsk	GMT+07:00	GMT+07:00	Tomsk Standard Time	Tomsk Daylight Time
Asia/Ujung_Pandang	WITA	CIST	Central Indonesia Time	Central Indonesia Summer Time
Asia/Ulaanbaatar	ULAT	ULAST	Ulaanbaatar Standard Time	Ulaanbaatar Summer Time
Asia/Ulan_Bator	ULAT	ULAST	Ulaanbaatar Standard Time	Ulaanbaatar Summer Time
Asia/Urumqi	XJT	XJDT	Xinjiang Standard Time	Xinjiang Daylight Time
Asia/Ust-Nera	VLAT	VLAST	Vladivostok Standard Time	Vladivostok Summer Time
Asia/Vientiane	ICT	ICST	Indochina Time	Indochina Summer Time
Asia/Vladivostok	VLAT	VLAST	Vladivostok Standard Time	Vladivostok Summer Time
Asia/Yakutsk	YAKT	YAKST	Yakutsk Standard Time	Yakutsk Summer Time
Asia/Yangon	MMT	MMST	Myanmar Time	Myanmar Summer Time
Asia/Yekaterinburg	YEKT	YEKST	Yekaterinburg Standard Time	Yekaterinburg Summer Time
Asia/Yerevan	AMT	AMST	Armenia Standard Time	Armenia Summer Time
Atlantic/Azores	AZOT	AZOST	Azores Standard Time	Azores Summer Time
Atlantic/Bermuda	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
Atlantic/Canary	WET	WEST	Western European Standard Time	Western European Summer Time
Atlantic/Cape_Verde	CVT	CVST	Cape Verde Standard Time	Cape Verde Summer Time
Atlantic/Faeroe	WET	WEST	Western European Standard Time	Western European Summer Time
Atlantic/Faroe	WET	WEST	Western European Standard Time	Western European Summer Time
Atlantic/Jan_Mayen	CET	CEST	Central European Standard Time	Central European Summer Time
Atlantic/Madeira	WET	WEST	Western European Standard Time	Western European Summer Time
Atlantic/Reykjavik	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Atlantic/South_Georgia	GST	GDT	South Georgia Time	South Georgia Daylight Time
Atlantic/St_Helena	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Atlantic/Stanley	FKT	FKST	Falkland Islands Standard Time	Falkland Islands Summer Time
Australia/ACT	AEST	AEDT	Australian Eastern Standard Time	Australian Eastern Daylight Time
Australia/Adelaide	ACST	ACDT	Australian Central Standard Time	Australian Central Daylight Time
Australia/Brisbane	AEST	AEDT	Australian Eastern Standard Time	Australian Eastern Daylight Time
Australia/Broken_Hill	ACST	ACDT	Australian Central Standard Time	Australian Central Daylight Time
Australia/Canberra	AEST	AEDT	Australian Eastern Standard Time	Australian Eastern Daylight Time
Australia/Currie	AEST	AEDT	Australian Eastern Standard Time	Australian Eastern Daylight Time
Australia/Darwin	ACST	ACDT	Australian Central Standard Time	Australian Central Daylight Time
Australia/Eucla	ACWST	ACWDT	Australian Central Western Standard Time	Australian Central Western Daylight Time
Australia/Hobart	AEST	AEDT	Australian Eastern Standard Time	Australian Eastern Daylight Time
Australia/LHI	LHST	LHDT	Lord Howe Standard Time	Lord Howe Daylight Time
Australia/Lindeman	AEST	AEDT	Australian Eastern Standard Time	Australian Eastern Daylight Time
Australia/Lord_Howe	LHST	LHDT	Lord Howe Standard Time	Lord Howe Daylight Time
Australia/Melbourne	AEST	AEDT	Australian Eastern Standard Time	Australian Eastern Daylight Time
Australia/NSW	AEST	AEDT	Australian Eastern Standard Time	Australian Eastern Daylight Time
Australia/North	ACST	ACDT	Australian Central Standard Time	Australian Central Daylight Time
Australia/Perth	AWST	AWDT	Australian Western Standard Time	Australian Western Daylight Time
Australia/Queensland	AEST	AEDT	Australian Eastern Standard Time	Australian Eastern Daylight Time
Australia/South	ACST	ACDT	Australian Central Standard Time	Australian Central Daylight Time
Australia/Sydney	AEST	AEDT	Australian Eastern Standard Time	Australian Eastern Daylight Time
Australia/Tasmania	AEST	AEDT	Australian Eastern Standard Time	Australian Eastern Daylight Time
Australia/Victoria	AEST	AEDT	Australian Eastern Standard Time	Australian Eastern Daylight Time
Australia/West	AWST	AWDT	Australian Western Standard Time	Australian Western Daylight Time
Australia/Yancowinna	ACST	ACDT	Australian Central Standard Time	Australian Central Daylight Time
Brazil/Acre	ACT	ACST	Acre Standard Time	Acre Summer Time
Brazil/DeNoronha	FNT	FNST	Fernando de Noronha Standard Time	Fernando de Noronha Summer Time
Brazil/East	BRT	BRST	Brasilia Standard Time	Brasilia Summer Time
Brazil/West	AMT	AMST	Amazon Standard Time	Amazon Summer Time
CET	CET	CEST	Central European Time	Central European Summer Time
CST6CDT	CST	CDT	Central Standard Time	Central Daylight Time
Canada/Atlantic	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
Canada/Central	CST	CDT	Central Standard Time	Central Daylight Time
Canada/Eastern	EST	EDT	Eastern Standard Time	Eastern Daylight Time
Canada/Mountain	MST	MDT	Mountain Standard Time	Mountain Daylight Time
Canada/Newfoundland	NST	NDT	Newfoundland Standard Time	Newfoundland Daylight Time
Canada/Pacific	PST	PDT	Pacific Standard Time	Pacific Daylight Time
Canada/Saskatchewan	CST	CDT	Central Standard Time	Central Daylight Time
Canada/Yukon	MST	MDT	Mountain Standard Time	Mountain Daylight Time
Chile/Continental	CLT	CLST	Chile Standard Time	Chile Summer Time
Chile/EasterIsland	EAST	EASST	Easter Island Standard Time	Easter Island Summer Time
Cuba	CST	CDT	Cuba Standard Time	Cuba Daylight Time
EET	EET	EEST	Eastern European Time	Eastern European Summer Time
EST5EDT	EST	EDT	Eastern Standard Time	Eastern Daylight Time
Egypt	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Eire	GMT	IST	Greenwich Mean Time	Irish Standard Time
Etc/GMT	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Etc/GMT+0	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Etc/GMT+1	GMT-01:00	GMT-01:00	GMT-01:00	GMT-01:00
Etc/GMT+10	GMT-10:00	GMT-10:00	GMT-10:00	GMT-10:00
Etc/GMT+11	GMT-11:00	GMT-11:00	GMT-11:00	GMT-11:00
Etc/GMT+12	GMT-12:00	GMT-12:00	GMT-12:00	GMT-12:00
Etc/GMT+2	GMT-02:00	GMT-02:00	GMT-02:00	GMT-02:00
Etc/GMT+3	GMT-03:00	GMT-03:00	GMT-03:00	GMT-03:00
Etc/GMT+4	GMT-04:00	GMT-04:00	GMT-04:00	GMT-04:00
Etc/GMT+5	GMT-05:00	GMT-05:00	GMT-05:00	GMT-05:00
Etc/GMT+6	GMT-06:00	GMT-06:00	GMT-06:00	GMT-06:00
Etc/GMT+7	GMT-07:00	GMT-07:00	GMT-07:00	GMT-07:00
Etc/GMT+8	GMT-08:00	GMT-08:00	GMT-08:00	GMT-08:00
Etc/GMT+9	GMT-09:00	GMT-09:00	GMT-09:00	GMT-09:00
Etc/GMT-0	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Etc/GMT-1	GMT+01:00	GMT+01:00	GMT+01:00	GMT+01:00
Etc/GMT-10	GMT+10:00	GMT+10:00	GMT+10:00	GMT+10:00
Etc/GMT-11	GMT+11:00	GMT+11:00	GMT+11:00	GMT+11:00
Etc/GMT-12	GMT+12:00	GMT+12:00	GMT+12:00	GMT+12:00
Etc/GMT-13	GMT+13:00	GMT+13:00	GMT+13:00	GMT+13:00
Etc/GMT-14	GMT+14:00	GMT+14:00	GMT+14:00	GMT+14:00
Etc/GMT-2	GMT+02:00	GMT+02:00	GMT+02:00	GMT+02:00
Etc/GMT-3	GMT+03:00	GMT+03:00	GMT+03:00	GMT+03:00
Etc/GMT-4	GMT+04:00	GMT+04:00	GMT+04:00	GMT+04:00
Etc/GMT-5	GMT+05:00	GMT+05:00	GMT+05:00	GMT+05:00
Etc/GMT-6	GMT+06:00	GMT+06:00	GMT+06:00	GMT+06:00
Etc/GMT-7	GMT+07:00	GMT+07:00	GMT+07:00	GMT+07:00
Etc/GMT-8	GMT+08:00	GMT+08:00	GMT+08:00	GMT+08:00
Etc/GMT-9	GMT+09:00	GMT+09:00	GMT+09:00	GMT+09:00
Etc/GMT0	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Etc/Greenwich	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Etc/UCT	UTC	UTC	Coordinated Universal Time	Coordinated Universal Time
Etc/UTC	UTC	UTC	Coordinated Universal Time	Coordinated Universal Time
Etc/Universal	UTC	UTC	Coordinated Universal Time	Coordinated Universal Time
Etc/Zulu	UTC	UTC	Coordinated Universal Time	Coordinated Universal Time
Europe/Amsterdam	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Andorra	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Astrakhan	GMT+04:00	GMT+04:00	Astrakhan Standard Time	Astrakhan Standard Time
Europe/Athens	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Europe/Belfast	GMT	BST	Greenwich Mean Time	British Summer Time
Europe/Belgrade	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Berlin	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Bratislava	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Brussels	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Bucharest	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Europe/Budapest	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Busingen	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Chisinau	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Europe/Copenhagen	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Dublin	GMT	IST	Greenwich Mean Time	Irish Standard Time
Europe/Gibraltar	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Guernsey	GMT	BST	Greenwich Mean Time	British Summer Time
Europe/Helsinki	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Europe/Isle_of_Man	GMT	BST	Greenwich Mean Time	British Summer Time
Europe/Istanbul	TRT	TRST	Turkey Time	Turkey Summer Time
Europe/Jersey	GMT	BST	Greenwich Mean Time	British Summer Time
Europe/Kaliningrad	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Europe/Kiev	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Europe/Kirov	MSK	MSD	Moscow Standard Time	Moscow Daylight Time
Europe/Kyiv	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Europe/Lisbon	WET	WEST	Western European Standard Time	Western European Summer Time
Europe/Ljubljana	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/London	GMT	BST	Greenwich Mean Time	British Summer Time
Europe/Luxembourg	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Madrid	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Malta	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Mariehamn	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Europe/Minsk	MSK	MSD	Moscow Standard Time	Moscow Summer Time
Europe/Monaco	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Moscow	MSK	MSD	Moscow Standard Time	Moscow Summer Time
Europe/Nicosia	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Europe/Oslo	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Paris	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Podgorica	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Prague	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Riga	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Europe/Rome	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Samara	SAMT	SAMST	Samara Standard Time	Samara Summer Time
Europe/San_Marino	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Sarajevo	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Saratov	GMT+04:00	GMT+04:00	Saratov Standard Time	Saratov Standard Time
Europe/Simferopol	MSK	MSD	Moscow Standard Time	Moscow Summer Time
Europe/Skopje	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Sofia	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Europe/Stockholm	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Tallinn	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Europe/Tirane	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Tiraspol	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Europe/Ulyanovsk	GMT+04:00	GMT+04:00	Ulyanovsk Standard Time	Ulyanovsk Standard Time
Europe/Uzhgorod	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Europe/Vaduz	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Vatican	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Vienna	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Vilnius	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Europe/Volgograd	MSK	MSD	Volgograd Standard Time	Volgograd Summer Time
Europe/Warsaw	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Zagreb	CET	CEST	Central European Standard Time	Central European Summer Time
Europe/Zaporozhye	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
Europe/Zurich	CET	CEST	Central European Standard Time	Central European Summer Time
GB	GMT	BST	Greenwich Mean Time	British Summer Time
GB-Eire	GMT	BST	Greenwich Mean Time	British Summer Time
GMT	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
GMT0	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Greenwich	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Hongkong	HKT	HKST	Hong Kong Standard Time	Hong Kong Summer Time
Iceland	GMT	GMT	Greenwich Mean Time	Greenwich Mean Time
Indian/Antananarivo	EAT	EAST	East Africa Time	Eastern African Summer Time
Indian/Chagos	IOT	IOST	Indian Ocean Time	Indian Ocean Territory Summer Time
Indian/Christmas	CXT	CXST	Christmas Island Time	Christmas Island Summer Time
Indian/Cocos	CCT	CCST	Cocos Islands Time	Cocos Islands Summer Time
Indian/Comoro	EAT	EAST	East Africa Time	Eastern African Summer Time
Indian/Kerguelen	TFT	TFST	French Southern & Antarctic Time	French Southern & Antarctic Lands Summer Time
Indian/Mahe	SCT	SCST	Seychelles Time	Seychelles Summer Time
Indian/Maldives	MVT	MVST	Maldives Time	Maldives Summer Time
Indian/Mauritius	MUT	MUST	Mauritius Standard Time	Mauritius Summer Time
Indian/Mayotte	EAT	EAST	East Africa Time	Eastern African Summer Time
Indian/Reunion	RET	REST	Réunion Time	Reunion Summer Time
Iran	IRST	IRDT	Iran Standard Time	Iran Daylight Time
Israel	IST	IDT	Israel Standard Time	Israel Daylight Time
Jamaica	EST	EDT	Eastern Standard Time	Eastern Daylight Time
Japan	JST	JDT	Japan Standard Time	Japan Daylight Time
Kwajalein	MHT	MHST	Marshall Islands Time	Marshall Islands Summer Time
Libya	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
MET	MET	MEST	Middle Europe Time	Middle Europe Summer Time
MST7MDT	MST	MDT	Mountain Standard Time	Mountain Daylight Time
Mexico/BajaNorte	PST	PDT	Pacific Standard Time	Pacific Daylight Time
Mexico/BajaSur	MST	MDT	Mexican Pacific Standard Time	Mexican Pacific Daylight Time
Mexico/General	CST	CDT	Central Standard Time	Central Daylight Time
NZ	NZST	NZDT	New Zealand Standard Time	New Zealand Daylight Time
NZ-CHAT	CHAST	CHADT	Chatham Standard Time	Chatham Daylight Time
Navajo	MST	MDT	Mountain Standard Time	Mountain Daylight Time
PRC	CST	CDT	China Standard Time	China Daylight Time
PST8PDT	PST	PDT	Pacific Standard Time	Pacific Daylight Time
Pacific/Apia	WSST	WSDT	Apia Standard Time	Apia Daylight Time
Pacific/Auckland	NZST	NZDT	New Zealand Standard Time	New Zealand Daylight Time
Pacific/Bougainville	BST	BST	Bougainville Standard Time	Bougainville Daylight Time
Pacific/Chatham	CHAST	CHADT	Chatham Standard Time	Chatham Daylight Time
Pacific/Chuuk	CHUT	CHUST	Chuuk Time	Chuuk Summer Time
Pacific/Easter	EAST	EASST	Easter Island Standard Time	Easter Island Summer Time
Pacific/Efate	VUT	VUST	Vanuatu Standard Time	Vanuatu Summer Time
Pacific/Enderbury	PHOT	PHOST	Phoenix Islands Time	Phoenix Is. Summer Time
Pacific/Fakaofo	TKT	TKST	Tokelau Time	Tokelau Summer Time
Pacific/Fiji	FJT	FJST	Fiji Standard Time	Fiji Summer Time
Pacific/Funafuti	TVT	TVST	Tuvalu Time	Tuvalu Summer Time
Pacific/Galapagos	GALT	GALST	Galapagos Time	Galapagos Summer Time
Pacific/Gambier	GAMT	GAMST	Gambier Time	Gambier Summer Time
Pacific/Guadalcanal	SBT	SBST	Solomon Islands Time	Solomon Is. Summer Time
Pacific/Guam	ChST	ChDT	Chamorro Standard Time	Chamorro Daylight Time
Pacific/Honolulu	HST	HDT	Hawaii-Aleutian Standard Time	Hawaii-Aleutian Daylight Time
Pacific/Johnston	HAST	HADT	Hawaii-Aleutian Standard Time	Hawaii-Aleutian Daylight Time
Pacific/Kanton	GMT+13:00	GMT+13:00	Kanton Standard Time	Kanton Daylight Time
Pacific/Kiritimati	LINT	LINST	Line Islands Time	Line Is. Summer Time
Pacific/Kosrae	KOST	KOSST	Kosrae Time	Kosrae Summer Time
Pacific/Kwajalein	MHT	MHST	Marshall Islands Time	Marshall Islands Summer Time
Pacific/Majuro	MHT	MHST	Marshall Islands Time	Marshall Islands Summer Time
Pacific/Marquesas	MART	MARST	Marquesas Time	Marquesas Summer Time
Pacific/Midway	SST	SDT	Samoa Standard Time	Samoa Daylight Time
Pacific/Nauru	NRT	NRST	Nauru Time	Nauru Summer Time
Pacific/Niue	NUT	NUST	Niue Time	Niue Summer Time
Pacific/Norfolk	NFT	NFST	Norfolk Island Standard Time	Norfolk Island Daylight Time
Pacific/Noumea	NCT	NCST	New Caledonia Standard Time	New Caledonia Summer Time
Pacific/Pago_Pago	SST	SDT	Samoa Standard Time	Samoa Daylight Time
Pacific/Palau	PWT	PWST	Palau Time	Palau Summer Time
Pacific/Pitcairn	PST	PDT	Pitcairn Time	Pitcairn Daylight Time
Pacific/Pohnpei	PONT	PONST	Ponape Time	Pohnpei Summer Time
Pacific/Ponape	PONT	PONST	Ponape Time	Pohnpei Summer Time
Pacific/Port_Moresby	PGT	PGST	Papua New Guinea Time	Papua New Guinea Summer Time
Pacific/Rarotonga	CKT	CKHST	Cook Islands Standard Time	Cook Islands Half Summer Time
Pacific/Saipan	ChST	ChDT	Chamorro Standard Time	Chamorro Daylight Time
Pacific/Samoa	SST	SDT	Samoa Standard Time	Samoa Daylight Time
Pacific/Tahiti	TAHT	TAHST	Tahiti Time	Tahiti Summer Time
Pacific/Tarawa	GILT	GILST	Gilbert Islands Time	Gilbert Is. Summer Time
Pacific/Tongatapu	TOT	TOST	Tonga Standard Time	Tonga Summer Time
Pacific/Truk	CHUT	CHUST	Chuuk Time	Chuuk Summer Time
Pacific/Wake	WAKT	WAKST	Wake Island Time	Wake Summer Time
Pacific/Wallis	WFT	WFST	Wallis & Futuna Time	Wallis & Futuna Summer Time
Pacific/Yap	CHUT	CHUST	Chuuk Time	Chuuk Summer Time
Poland	CET	CEST	Central European Standard Time	Central European Summer Time
Portugal	WET	WEST	Western European Standard Time	Western European Summer Time
ROK	KST	KDT	Korean Standard Time	Korean Daylight Time
Singapore	SGT	SGST	Singapore Standard Time	Singapore Summer Time
Turkey	TRT	TRST	Turkey Time	Turkey Summer Time
UCT	UTC	UTC	Coordinated Universal Time	Coordinated Universal Time
US/Alaska	AKST	AKDT	Alaska Standard Time	Alaska Daylight Time
US/Aleutian	HAST	HADT	Hawaii-Aleutian Standard Time	Hawaii-Aleutian Daylight Time
US/Arizona	MST	MDT	Mountain Standard Time	Mountain Daylight Time
US/Central	CST	CDT	Central Standard Time	Central Daylight Time
US/East-Indiana	EST	EDT	Eastern Standard Time	Eastern Daylight Time
US/Eastern	EST	EDT	Eastern Standard Time	Eastern Daylight Time
US/Hawaii	HST	HDT	Hawaii-Aleutian Standard Time	Hawaii-Aleutian Daylight Time
US/Indiana-Starke	CST	CDT	Central Standard Time	Central Daylight Time
US/Michigan	EST	EDT	Eastern Standard Time	Eastern Daylight Time
US/Mountain	MST	MDT	Mountain Standard Time	Mountain Daylight Time
US/Pacific	PST	PDT	Pacific Standard Time	Pacific Daylight Time
US/Samoa	SST	SDT	Samoa Standard Time	Samoa Daylight Time
UTC	UTC	UTC	Coordinated Universal Time	Coordinated Universal Time
Universal	UTC	UTC	Coordinated Universal Time	Coordinated Universal Time
W-SU	MSK	MSD	Moscow Standard Time	Moscow Summer Time
WET	WET	WEST	Western European Time	Western European Summer Time
Zulu	UTC	UTC	Coordinated Universal Time	Coordinated Universal Time
EST	EST	EST	Eastern Standard Time	Eastern Standard Time
HST	HST	HST	Hawaii Standard Time	Hawaii Standard Time
MST	MST	MST	Mountain Standard Time	Mountain Standard Time
ACT	ACST	ACDT	Australian Central Standard Time	Australian Central Daylight Time
AET	AEST	AEDT	Australian Eastern Standard Time	Australian Eastern Daylight Time
AGT	ART	ARST	Argentine Time	Argentine Summer Time
ART	EET	EEST	Eastern European Standard Time	Eastern European Summer Time
AST	AKST	AKDT	Alaska Standard Time	Alaska Daylight Time
BET	BRT	BRST	Brasilia Standard Time	Brasilia Summer Time
BST	BDT	BDST	Bangladesh Standard Time	Bangladesh Summer Time
CAT	CAT	CAST	Central Africa Time	Central African Summer Time
CNT	NST	NDT	Newfoundland Standard Time	Newfoundland Daylight Time
CST	CST	CDT	Central Standard Time	Central Daylight Time
CTT	CST	CDT	China Standard Time	China Daylight Time
EAT	EAT	EAST	East Africa Time	Eastern African Summer Time
ECT	CET	CEST	Central European Standard Time	Central European Summer Time
IET	EST	EDT	Eastern Standard Time	Eastern Daylight Time
IST	IST	IDT	India Standard Time	India Daylight Time
JST	JST	JDT	Japan Standard Time	Japan Daylight Time
MIT	WSST	WSDT	Apia Standard Time	Apia Daylight Time
NET	AMT	AMST	Armenia Standard Time	Armenia Summer Time
NST	NZST	NZDT	New Zealand Standard Time	New Zealand Daylight Time
PLT	PKT	PKST	Pakistan Standard Time	Pakistan Summer Time
PNT	MST	MDT	Mountain Standard Time	Mountain Daylight Time
PRT	AST	ADT	Atlantic Standard Time	Atlantic Daylight Time
PST	PST	PDT	Pacific Standard Time	Pacific Daylight Time
SST	SBT	SBST	Solomon Islands Time	Solomon Is. Summer Time
VST	ICT	ICST	Indochina Time	Indochina Summer Time
"""


@cache
def java_zone_names() -> dict[str, tuple[str, str, str, str]]:
    names: dict[str, tuple[str, str, str, str]] = {}
    for line in _TABLE.splitlines():
        zone_id, short_std, short_dst, long_std, long_dst = line.split("\t")
        names[zone_id] = (short_std, short_dst, long_std, long_dst)
    return names
