// STUB for compiling pocketbert's generated Kotlin on Linux only; never shipped, never run. Android's AssetManager,
// with only what the templates call: https://developer.android.com/reference/android/content/res/AssetManager
package android.content.res

import java.io.InputStream

class AssetManager private constructor() {
    // https://developer.android.com/reference/android/content/res/AssetManager#open(java.lang.String)
    fun open(fileName: String): InputStream = throw UnsupportedOperationException("stub")
}
